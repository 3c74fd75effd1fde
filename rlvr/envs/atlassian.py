"""An in-memory, deterministic issue-tracker + wiki API (Jira-like issues, Confluence-like pages).

In the spirit of the enterprise tool-call environments of Vissa et al. 2026, "Beyond Next-Token Prediction: An RLVR
Proof of Concept for Tool-Use Agents on Atlassian Workflows" (arXiv:2607.01465; RECONSTRUCTED: the paper's
emulators are not public). Eleven tools, each described by a JSON schema (:data:`TOOL_SCHEMAS`), with nested
arguments, required fields and parent-child constraints shaped like Jira REST v3 / Confluence v2:
``fields.project.key``, ``fields.issuetype.name``, ``body.storage.value``, sub-tasks need an existing parent in the
same project, page updates need ``version.number`` = current + 1, page titles are unique per space, status changes
follow a fixed workflow.

Everything is deterministic: issue keys count up per project (``ENG-1``), ids and page ids count up
globally, and no clock or randomness is used, so a trace always yields the same state. A call never raises:
bad calls (unknown tool, schema violation, missing object, illegal transition, version conflict) return
``{"ok": False, "error": ...}`` like an HTTP 4xx and leave the state unchanged.

Seed state (``reset(seed)``; also ``meta["initial_state"]`` for the ``toolcall_env`` verifier)::

    {"projects": ["ENG"], "spaces": ["DOC"],
     "issues": [{"project": "ENG", "summary": "...", "issuetype": "Bug", "status": "To Do",
                 "labels": [...], "description": "...", "parent": "ENG-1"}],
     "pages":  [{"space_key": "DOC", "title": "...", "body": "...", "parent_id": null}]}
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

from rlvr.envs.schema import schema_errors

__all__ = ["IssueTrackerEnv", "TOOL_SCHEMAS", "WORKFLOW", "ISSUE_TYPES"]

ISSUE_TYPES = ["Bug", "Task", "Story", "Epic", "Sub-task"]
PRIORITIES = ["Highest", "High", "Medium", "Low", "Lowest"]
WORKFLOW = {  # transition name -> (from status, to status)
    "Start Progress": ("To Do", "In Progress"), "Stop Progress": ("In Progress", "To Do"),
    "Resolve": ("In Progress", "Done"), "Reopen": ("Done", "To Do"),
}

_S, _KEY = {"type": "string", "minLength": 1}, {"type": "string", "pattern": r"^[A-Z][A-Z0-9]*-\d+$"}
_NAMED = lambda enum: {"type": "object", "properties": {"name": {"type": "string", "enum": enum}},  # noqa: E731
                       "required": ["name"], "additionalProperties": False}
_LABELS = {"type": "array", "items": {"type": "string", "pattern": r"^\S+$"}, "maxItems": 20}
_BODY = {"type": "object", "required": ["storage"], "additionalProperties": False,
         "properties": {"storage": {"type": "object", "required": ["value"], "additionalProperties": False,
                                    "properties": {"value": {"type": "string"},
                                                   "representation": {"type": "string", "enum": ["storage"]}}}}}


def _tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    """A tool schema; reads carry MCP's ``annotations.readOnlyHint`` (the tool-call verifiers treat calls of
    other tools as changes of state: docs/verifiers.md, Tool calls: sprays, schemas and side effects)."""
    read_only = name.split("_", 1)[-1].startswith(("get", "search"))
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required,
                           "additionalProperties": False},
            "annotations": {"readOnlyHint": read_only}}


TOOL_SCHEMAS: list[dict] = [
    _tool("jira_create_issue", "Create an issue. Sub-tasks need fields.parent.key in the same project.",
          {"fields": {"type": "object", "additionalProperties": False,
                      "required": ["project", "summary", "issuetype"],
                      "properties": {"project": {"type": "object", "properties": {"key": _S}, "required": ["key"],
                                                 "additionalProperties": False},
                                     "summary": {**_S, "maxLength": 255}, "issuetype": _NAMED(ISSUE_TYPES),
                                     "description": {"type": "string"}, "labels": _LABELS,
                                     "priority": _NAMED(PRIORITIES),
                                     "parent": {"type": "object", "properties": {"key": _KEY}, "required": ["key"],
                                                "additionalProperties": False}}}},
          ["fields"]),
    _tool("jira_get_issue", "Read one issue by key.", {"issue_key": _KEY}, ["issue_key"]),
    _tool("jira_search_issues", "Find issues; all given filters must hold. text matches summary/description.",
          {"project": _S, "status": {"type": "string", "enum": ["To Do", "In Progress", "Done"]},
           "issuetype": {"type": "string", "enum": ISSUE_TYPES}, "label": _S, "text": _S,
           "max_results": {"type": "integer", "minimum": 1, "maximum": 100}}, []),
    _tool("jira_update_issue", "Edit summary, description, labels or priority of an issue.",
          {"issue_key": _KEY, "fields": {"type": "object", "additionalProperties": False,
                                         "properties": {"summary": {**_S, "maxLength": 255},
                                                        "description": {"type": "string"}, "labels": _LABELS,
                                                        "priority": _NAMED(PRIORITIES)}}},
          ["issue_key", "fields"]),
    _tool("jira_get_transitions", "List the workflow transitions available from the issue's status.",
          {"issue_key": _KEY}, ["issue_key"]),
    _tool("jira_transition_issue", "Move an issue along the workflow by transition name.",
          {"issue_key": _KEY, "transition": _NAMED(list(WORKFLOW))}, ["issue_key", "transition"]),
    _tool("jira_add_comment", "Add a comment to an issue.", {"issue_key": _KEY, "body": _S}, ["issue_key", "body"]),
    _tool("confluence_create_page", "Create a page; titles are unique within a space.",
          {"space_key": _S, "title": {**_S, "maxLength": 255}, "body": _BODY, "parent_id": _S},
          ["space_key", "title", "body"]),
    _tool("confluence_get_page", "Read one page by id.", {"page_id": _S}, ["page_id"]),
    _tool("confluence_search_pages", "Find pages; all given filters must hold. text matches the body.",
          {"space_key": _S, "title": _S, "text": _S}, []),
    _tool("confluence_update_page", "Replace a page's title and body; version.number must be current + 1.",
          {"page_id": _S, "title": {**_S, "maxLength": 255}, "body": _BODY,
           "version": {"type": "object", "properties": {"number": {"type": "integer", "minimum": 1}},
                       "required": ["number"], "additionalProperties": False}},
          ["page_id", "title", "body", "version"]),
]


class _CallError(Exception):
    pass


class IssueTrackerEnv:
    """The emulated API. ``call(name, arguments)`` -> observation dict; ``state_dict()`` -> full state."""

    def __init__(self, seed: dict | None = None):
        self.tools = copy.deepcopy(TOOL_SCHEMAS)
        self._schemas = {t["name"]: t["parameters"] for t in self.tools}
        self._handlers: dict[str, Callable[[dict], Any]] = {n: getattr(self, f"_{n}") for n in self._schemas}
        self.reset(seed)

    @property
    def tool_names(self) -> set[str]:
        return set(self._schemas)

    # ---- state -------------------------------------------------------------------------------
    def reset(self, seed: dict | None = None) -> None:
        """Empty state, then the seed's projects, spaces, issues and pages (created through the API rules)."""
        seed = seed or {}
        self.projects = {p if isinstance(p, str) else p["key"]: {"next": 1} for p in seed.get("projects", [])}
        self.spaces = set(seed.get("spaces", []))
        self.issues: dict[str, dict] = {}
        self.pages: dict[str, dict] = {}
        self.next_id = 10001
        for spec in seed.get("issues", []):
            self._seed_issue(spec)
        for spec in seed.get("pages", []):
            self._confluence_create_page({"space_key": spec["space_key"], "title": spec["title"],
                                          "body": {"storage": {"value": spec.get("body", "")}},
                                          **({"parent_id": spec["parent_id"]} if spec.get("parent_id") else {})})

    def _seed_issue(self, spec: dict) -> None:
        fields = {"project": {"key": spec["project"]}, "summary": spec["summary"],
                  "issuetype": {"name": spec.get("issuetype", "Task")}, "labels": list(spec.get("labels", [])),
                  "description": spec.get("description", "")}
        if spec.get("parent"):
            fields["parent"] = {"key": spec["parent"]}
        key = self._jira_create_issue({"fields": fields})["key"]
        self.issues[key]["fields"]["status"]["name"] = spec.get("status", "To Do")

    def state_dict(self) -> dict:
        return copy.deepcopy({"projects": self.projects, "spaces": sorted(self.spaces), "issues": self.issues,
                              "pages": self.pages, "next_id": self.next_id})

    def load_state_dict(self, state: dict) -> None:
        state = copy.deepcopy(state)
        self.projects, self.spaces, self.issues = state["projects"], set(state["spaces"]), state["issues"]
        self.pages, self.next_id = state["pages"], state["next_id"]

    def _new_id(self) -> str:
        self.next_id += 1
        return str(self.next_id - 1)

    # ---- calls -------------------------------------------------------------------------------
    def call(self, name: str, arguments: Any) -> dict:
        """Run one tool call; never raises. ``{"ok": True, "result": ...}`` or ``{"ok": False, "error": ...}``."""
        if name not in self._schemas:
            return {"ok": False, "error": f"unknown tool {name!r}"}
        errors = schema_errors(arguments, self._schemas[name], "arguments")
        if errors:
            return {"ok": False, "error": "; ".join(errors[:5])}
        try:
            return {"ok": True, "result": copy.deepcopy(self._handlers[name](arguments))}
        except _CallError as e:
            return {"ok": False, "error": str(e)}

    def run(self, calls: list[dict]) -> list[dict]:
        """Execute ``[{"name", "arguments"}, ...]`` in order; the observations."""
        return [self.call(c.get("name"), c.get("arguments")) for c in calls]

    def step(self, calls: list[dict]) -> tuple[str, bool]:
        """One turn of parsed calls: the JSON observation, and done when there were none. The episode
        environment over the policy's text (parsing, malformed calls, the final-state reward) is
        :class:`rlvr.envs.tool_env.ToolCallEnv` (``issue_tracker``), which runs on this API."""
        return json.dumps(self.run(calls), sort_keys=True), not calls

    # ---- Jira --------------------------------------------------------------------------------
    def _issue(self, key: str) -> dict:
        if key not in self.issues:
            raise _CallError(f"issue {key} does not exist")
        return self.issues[key]

    def _jira_create_issue(self, a: dict) -> dict:
        f = a["fields"]
        project = f["project"]["key"]
        if project not in self.projects:
            raise _CallError(f"project {project} does not exist")
        is_sub, parent = f["issuetype"]["name"] == "Sub-task", f.get("parent", {}).get("key")
        if is_sub != bool(parent):
            raise _CallError("a Sub-task needs fields.parent, and only a Sub-task may have one")
        if parent and (parent not in self.issues or not parent.startswith(project + "-")):
            raise _CallError(f"parent {parent} does not exist in project {project}")
        key = f"{project}-{self.projects[project]['next']}"
        self.projects[project]["next"] += 1
        self.issues[key] = {"key": key, "id": self._new_id(), "fields": {
            "project": {"key": project}, "summary": f["summary"], "issuetype": {"name": f["issuetype"]["name"]},
            "description": f.get("description", ""), "labels": list(f.get("labels", [])),
            "priority": {"name": f.get("priority", {}).get("name", "Medium")}, "status": {"name": "To Do"},
            "parent": {"key": parent} if parent else None, "comment": {"comments": [], "total": 0}}}
        return {"key": key, "id": self.issues[key]["id"]}

    def _jira_get_issue(self, a: dict) -> dict:
        return self._issue(a["issue_key"])

    def _jira_search_issues(self, a: dict) -> dict:
        def hit(issue: dict) -> bool:
            f = issue["fields"]
            text = a.get("text", "").lower()
            return (a.get("project") in (None, f["project"]["key"]) and a.get("status") in (None, f["status"]["name"])
                    and a.get("issuetype") in (None, f["issuetype"]["name"])
                    and ("label" not in a or a["label"] in f["labels"])
                    and (not text or text in f["summary"].lower() or text in f["description"].lower()))
        found = [{"key": k, "summary": i["fields"]["summary"]} for k, i in self.issues.items() if hit(i)]
        return {"total": len(found), "issues": found[: a.get("max_results", 50)]}

    def _jira_update_issue(self, a: dict) -> dict:
        issue = self._issue(a["issue_key"])
        if not a["fields"]:
            raise _CallError("fields must not be empty")
        issue["fields"].update(copy.deepcopy(a["fields"]))
        return {"key": issue["key"]}

    def _jira_get_transitions(self, a: dict) -> dict:
        status = self._issue(a["issue_key"])["fields"]["status"]["name"]
        return {"transitions": [{"name": n, "to": to} for n, (frm, to) in WORKFLOW.items() if frm == status]}

    def _jira_transition_issue(self, a: dict) -> dict:
        issue, name = self._issue(a["issue_key"]), a["transition"]["name"]
        frm, to = WORKFLOW[name]
        if issue["fields"]["status"]["name"] != frm:
            raise _CallError(f"transition {name!r} is not available from {issue['fields']['status']['name']!r}")
        issue["fields"]["status"]["name"] = to
        return {"key": issue["key"], "status": to}

    def _jira_add_comment(self, a: dict) -> dict:
        comments = self._issue(a["issue_key"])["fields"]["comment"]
        comments["comments"].append({"id": self._new_id(), "body": a["body"]})
        comments["total"] += 1
        return {"id": comments["comments"][-1]["id"]}

    # ---- Confluence --------------------------------------------------------------------------
    def _page(self, page_id: str) -> dict:
        if page_id not in self.pages:
            raise _CallError(f"page {page_id} does not exist")
        return self.pages[page_id]

    def _title_taken(self, space: str, title: str, except_id: str | None = None) -> bool:
        return any(p["space_key"] == space and p["title"] == title and i != except_id for i, p in self.pages.items())

    def _confluence_create_page(self, a: dict) -> dict:
        space, parent = a["space_key"], a.get("parent_id")
        if space not in self.spaces:
            raise _CallError(f"space {space} does not exist")
        if self._title_taken(space, a["title"]):
            raise _CallError(f"a page titled {a['title']!r} already exists in {space}")
        if parent is not None and self._page(parent)["space_key"] != space:
            raise _CallError(f"parent page {parent} is not in space {space}")
        page_id = self._new_id()
        self.pages[page_id] = {"id": page_id, "space_key": space, "title": a["title"], "parent_id": parent,
                               "body": {"storage": {"value": a["body"]["storage"]["value"],
                                                    "representation": "storage"}},
                               "version": {"number": 1}, "status": "current"}
        return {"id": page_id}

    def _confluence_get_page(self, a: dict) -> dict:
        return self._page(a["page_id"])

    def _confluence_search_pages(self, a: dict) -> dict:
        text = a.get("text", "").lower()
        found = [{"id": i, "title": p["title"], "space_key": p["space_key"]} for i, p in self.pages.items()
                 if a.get("space_key") in (None, p["space_key"]) and a.get("title") in (None, p["title"])
                 and (not text or text in p["body"]["storage"]["value"].lower())]
        return {"total": len(found), "results": found}

    def _confluence_update_page(self, a: dict) -> dict:
        page = self._page(a["page_id"])
        want = page["version"]["number"] + 1
        if a["version"]["number"] != want:
            raise _CallError(f"version conflict: expected version.number {want}")
        if self._title_taken(page["space_key"], a["title"], except_id=page["id"]):
            raise _CallError(f"a page titled {a['title']!r} already exists in {page['space_key']}")
        page.update(title=a["title"], version={"number": want})
        page["body"]["storage"]["value"] = a["body"]["storage"]["value"]
        return {"id": page["id"], "version": want}
