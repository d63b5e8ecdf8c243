"""The whitebox check Tempest makes of a PMD-sharing server and its
neighbour, on ``/api/layout`` documents: each way of it can fail."""

import pytest

from tempest_plugin import exporter

FWD, NB = "f-uuid", "n-uuid"


def layout(owners_by_cache, groups=None):
    """owners_by_cache: cache id -> {group: ways}; 11 ways per cache."""
    caches = []
    for cid, owners in owners_by_cache.items():
        cells = [{"way": w, "owners": [
            {"group": g, "kind": "x", "label": g}
            for g, ways in owners.items() if w in ways]} for w in range(11)]
        caches.append({"resource": "L3", "cache_id": cid, "type": "both",
                       "ways": 11, "cells": cells})
    return {"caches": caches, "groups": groups if groups is not None else [
        {"group": "/", "kind": "host", "instance_uuid": None},
        {"group": "nova-rdt-pmd", "kind": "pmd", "instance_uuid": None},
        {"group": "qemu-1-a-vcpus_0", "kind": "instance",
         "instance_uuid": FWD},
        {"group": "qemu-2-b-vcpus_0", "kind": "instance",
         "instance_uuid": NB}]}


# The PMD cores are on cache 0; on cache 1 the PMD COS holds the host's
# ways (as the lab cloud's gold-6252 shows it, the other way round).
GOOD = {0: {"/": {0, 1}, "nova-rdt-pmd": {7, 8},
            "qemu-1-a-vcpus_0": {5, 6, 7, 8}, "qemu-2-b-vcpus_0": {3, 4}},
        1: {"/": {0, 1}, "nova-rdt-pmd": {0, 1},
            "qemu-1-a-vcpus_0": {5, 6, 7, 8}, "qemu-2-b-vcpus_0": {3, 4}}}


def test_a_good_pair_has_no_problem():
    assert exporter.pmd_sharing_problems(layout(GOOD), FWD, 4, NB) == []


@pytest.mark.parametrize("change, said", [
    ({0: {"qemu-1-a-vcpus_0": {5, 6, 7}}}, "holds 3 ways on L3:0"),
    ({0: {"qemu-1-a-vcpus_0": {1, 2, 3, 4}}},
     "shares no way with the PMD COS on L3:0"),
    ({1: {"qemu-2-b-vcpus_0": {4, 5}}},
     "shares ways [5] with qemu-1-a-vcpus_0 on L3:1"),
    ({0: {"qemu-2-b-vcpus_0": {8, 9}}},
     "shares ways [8] with the PMD COS on L3:0"),
    ({0: {"nova-rdt-pmd": {0, 1}}},
     "the PMD COS holds no ways beyond the host's"),
])
def test_each_way_it_can_go_wrong_is_said(change, said):
    owners = {cid: dict(o) for cid, o in GOOD.items()}
    for cid, groups in change.items():
        owners[cid].update(groups)
    problems = exporter.pmd_sharing_problems(layout(owners), FWD, 4, NB)
    assert any(said in p for p in problems), problems


def test_a_server_without_a_group_of_its_own_is_said():
    doc = layout(GOOD)
    doc["groups"] = [g for g in doc["groups"]
                     if g.get("instance_uuid") != NB]
    problems = exporter.pmd_sharing_problems(doc, FWD, 4, NB)
    assert any("neighbour (n-uuid) has 0 groups" in p for p in problems)


def test_a_class_member_neighbour_is_judged_by_its_class_group():
    owners = {cid: {("nova-rdt-class-low_priority" if g == "qemu-2-b-vcpus_0"
                     else g): w for g, w in o.items()}
              for cid, o in GOOD.items()}
    doc = layout(owners)
    doc["groups"] = [g for g in doc["groups"] if g.get("instance_uuid") != NB]
    doc["groups"].append({"group": "nova-rdt-class-low_priority",
                          "kind": "class", "instance_uuid": None})
    assert exporter.pmd_sharing_problems(doc, FWD, 4, NB,
                                         "low_priority") == []
    owners[1]["nova-rdt-class-low_priority"] = {8, 9}
    problems = exporter.pmd_sharing_problems(layout(owners) | {
        "groups": doc["groups"]}, FWD, 4, NB, "low_priority")
    assert any("shares ways [8]" in p for p in problems), problems
