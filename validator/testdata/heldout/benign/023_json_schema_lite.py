schema = args.get("schema", {
    "type": "object",
    "required": ["id", "class", "tags"],
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "class": {"type": "string", "enum": ["a", "b", "c"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "properties": {"format": {"type": "string"}}},
    },
})
doc = args.get("doc", {"id": 0, "class": "d", "tags": ["x", 3], "meta": {"format": 1}})
TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool, "null": type(None)}


def check(node, sch, path="$"):
    errs = []
    type = sch.get("type")
    if type and not isinstance(node, TYPES[type]):
        return [f"{path}: expected {type}, got {node.__class__.__name__}"]
    if "enum" in sch and node not in sch["enum"]:
        errs.append(f"{path}: {node!r} not in {sch['enum']}")
    if "minimum" in sch and node < sch["minimum"]:
        errs.append(f"{path}: {node} < {sch['minimum']}")
    if type == "object":
        for req in sch.get("required", []):
            if req not in node:
                errs.append(f"{path}: missing {req}")
        for key, sub in sch.get("properties", {}).items():
            if key in node:
                errs.extend(check(node[key], sub, f"{path}.{key}"))
    if type == "array" and "items" in sch:
        for i, el in enumerate(node):
            errs.extend(check(el, sch["items"], f"{path}[{i}]"))
    return errs


errors = check(doc, schema)
return {"valid": not errors, "errors": errors}
