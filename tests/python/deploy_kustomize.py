"""Renders the kustomize overlays under deploy/k8s without a kustomize binary.

Neither Debian nor PyPI ships kustomize, so the deployment checks render the overlays here. It
implements only what deploy/k8s uses (resources, namespace, images, strategic-merge patches) and
refuses anything else, so a new kustomize feature in an overlay fails loudly instead of being
silently ignored. Where `kubectl kustomize` exists the checks compare both renderings.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

SUPPORTED_FIELDS = {"apiVersion", "kind", "resources", "namespace", "images", "patches"}

# Strategic-merge keys of the lists our patches touch (from the Kubernetes API's
# x-kubernetes-patch-merge-key); every other list is replaced whole, as the API does.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}


class UnsupportedKustomization(Exception):
    pass


def load_documents(path: Path) -> list[dict]:
    with path.open() as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def strategic_merge(base, patch, key: str | None = None):
    if isinstance(base, dict) and isinstance(patch, dict):
        if any(k.startswith("$") for k in patch):
            raise UnsupportedKustomization(f"patch directive in {sorted(patch)}")
        merged = dict(base)
        for k, v in patch.items():
            merged[k] = strategic_merge(base[k], v, k) if k in base else copy.deepcopy(v)
        return merged
    if isinstance(base, list) and isinstance(patch, list) and key in MERGE_KEYS:
        merge_key = MERGE_KEYS[key]
        merged = [copy.deepcopy(item) for item in base]
        for item in patch:
            index = next((i for i, old in enumerate(merged) if old.get(merge_key) == item[merge_key]), None)
            if index is None:
                merged.append(copy.deepcopy(item))
            else:
                merged[index] = strategic_merge(merged[index], item)
        return merged
    return copy.deepcopy(patch)


def _pod_specs(obj: dict):
    spec = obj.get("spec", {})
    if "template" in spec:
        yield spec["template"]["spec"]
    elif obj.get("kind") == "Pod":
        yield spec


def _set_images(objects: list[dict], images: list[dict]) -> None:
    for image in images:
        for obj in objects:
            for pod in _pod_specs(obj):
                for container in pod.get("containers", []) + pod.get("initContainers", []):
                    name, _, tag = container["image"].partition(":")
                    if name != image["name"]:
                        continue
                    new_tag = image.get("newTag", tag)
                    container["image"] = image.get("newName", name) + (f":{new_tag}" if new_tag else "")


def render(directory: Path) -> list[dict]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - SUPPORTED_FIELDS
    if unknown:
        raise UnsupportedKustomization(f"{directory}: fields {sorted(unknown)}")
    objects: list[dict] = []
    for resource in kustomization.get("resources", []):
        path = directory / resource
        objects += render(path) if path.is_dir() else load_documents(path)
    for patch in kustomization.get("patches", []):
        if set(patch) != {"path"}:
            raise UnsupportedKustomization(f"{directory}: patch form {sorted(patch)}")
        for doc in load_documents(directory / patch["path"]):
            matches = [i for i, obj in enumerate(objects)
                       if obj["kind"] == doc["kind"] and obj["metadata"]["name"] == doc["metadata"]["name"]]
            if len(matches) != 1:
                raise UnsupportedKustomization(f"{patch['path']}: {len(matches)} targets")
            objects[matches[0]] = strategic_merge(objects[matches[0]], doc)
    if "namespace" in kustomization:
        for obj in objects:
            obj["metadata"]["namespace"] = kustomization["namespace"]
    _set_images(objects, kustomization.get("images", []))
    return objects
