import copy
original = args.get("data", {"a": [1, 2, {"b": 3}], "format": "x"})
shallow = copy.copy(original)
deep = copy.deepcopy(original)
deep["a"][2]["b"] = 99
shallow["format"] = "y"
return {"original": original, "shallow": shallow, "deep": deep}
