"""Schemathesis hooks of the contract check.

Random identifiers almost never name state the server has, so most app calls
would only ever see an empty list or 404 `unknown_conversation`, and the
answer schemas of the interesting cases would go unchecked. These hooks bend
about half of the generated requests towards the state that tests/contract/run
seeds (tenant `acme`, user `u1` = the JWT's subject, conversations c1-c6) and
small pools of conversations that the touches create for that user (r*, and
d* which alone the deletes take).

They only ever replace a value that is already valid by another valid one
(identifier for identifier), so a positive case stays positive and a negative
case stays negative.
"""

import re

import schemathesis
from hypothesis import strategies as st

TENANT = "acme"
USER = "u1"
SEEDED = [f"c{i}" for i in range(1, 7)]
POOL = [f"r{i}" for i in range(12)]
CONVERSATIONS = SEEDED + POOL
# Deletes only take these (which touches also create): the conversations the
# other calls use must stay.
DOOMED = [f"d{i}" for i in range(6)]
IDENTIFIER = re.compile(r"[A-Za-z0-9._-]{1,64}")


def category_of(conversation):
    """The one category each known conversation has, so that biased touches
    do not all end in 409 conflict."""
    if conversation in ("c5", "c6"):
        return "system"
    if conversation[0] in "rd" and int(conversation[1:]) % 2:
        return "work"
    return "chat"


def valid(value):
    return isinstance(value, str) and IDENTIFIER.fullmatch(value) is not None


def valid_list(value, most):
    return isinstance(value, list) and 1 <= len(value) < most and all(valid(v) for v in value)


def endpoint(context):
    operation = context.operation
    return (operation.method.upper(), operation.path) if operation is not None else (None, None)


def with_user(members, most=500):
    if valid_list(members, most) and USER not in members:
        return [USER, *members]
    return members


def bias_ids(body, conversation):
    """Valid tenant and conversation ids swapped for the seeded ones."""
    body = dict(body)
    if valid(body.get("tenant")):
        body["tenant"] = TENANT
    if valid(body.get("conversation")):
        body["conversation"] = conversation
    return body


def bias_touch(body, conversation, flag):
    body = bias_ids(body, conversation)
    if body.get("conversation") == conversation:
        valid_category = isinstance(body.get("category"), str) and re.fullmatch(r"[a-z0-9_-]{1,32}", body["category"])
        # A valid category, or a missing one where the default is not the conversation's.
        if valid_category or ("category" not in body and category_of(conversation) != "chat"):
            body["category"] = category_of(conversation)
    body["members"] = with_user(body.get("members"))
    if flag and isinstance(body.get("mentions"), list) and len(body["mentions"]) < 500 and all(valid(m) for m in body["mentions"]):
        body["mentions"] = [USER, *body["mentions"]]
    return body


def bias_recall(body, conversation, _flag):
    body = bias_ids(body, conversation)
    body["members"] = with_user(body.get("members"))
    return body


def bias_mark_read(body, conversation, _flag):
    body = dict(body)
    if valid(body.get("conversation")):
        body["conversation"] = conversation
    return body


def bias_tenant_members(body, _conversation, _flag):
    body = dict(body)
    if valid(body.get("tenant")):
        body["tenant"] = TENANT
    body["members"] = with_user(body.get("members"))
    return body


def bias_clear_category(body, conversation, flag):
    body = dict(body)
    if valid(body.get("tenant")):
        body["tenant"] = TENANT
    if valid(body.get("user")):
        body["user"] = USER
    if isinstance(body.get("users"), list):
        body["users"] = with_user(body["users"], 1000)
    if flag and isinstance(body.get("category"), str) and re.fullmatch(r"[a-z0-9_-]{1,32}", body["category"]):
        body["category"] = category_of(conversation)
    return body


def bias_reconcile(body, _conversation, _flag):
    body = dict(body)
    if valid(body.get("tenant")):
        body["tenant"] = TENANT
    if isinstance(body.get("users"), list):
        body["users"] = with_user(body["users"], 1000)
    return body


BODIES = {
    ("POST", "/v1/touch"): bias_touch,
    ("POST", "/v1/recall"): bias_recall,
    ("POST", "/v1/mark-read"): bias_mark_read,
    ("POST", "/v1/admin/conversations/{id}/delete"): bias_tenant_members,
    ("POST", "/v1/leave"): bias_tenant_members,
    ("POST", "/v1/admin/clear-category"): bias_clear_category,
    ("POST", "/v1/admin/reconcile"): bias_reconcile,
}


@schemathesis.hook
def flatmap_body(context, body):
    bias = BODIES.get(endpoint(context))
    if bias is None or not isinstance(body, dict):
        return st.just(body)
    conversations = CONVERSATIONS + DOOMED if bias is bias_touch else CONVERSATIONS
    return st.tuples(st.booleans(), st.sampled_from(conversations), st.booleans()).map(
        lambda draw: bias(body, draw[1], draw[2]) if draw[0] else body
    )


@schemathesis.hook
def flatmap_path_parameters(context, path_parameters):
    _, path = endpoint(context)
    if path is None or "{id}" not in path or not valid(path_parameters.get("id")):
        return st.just(path_parameters)
    conversations = DOOMED if path.endswith("/delete") else CONVERSATIONS
    return st.tuples(st.booleans(), st.sampled_from(conversations)).map(
        lambda draw: {**path_parameters, "id": draw[1]} if draw[0] else path_parameters
    )
