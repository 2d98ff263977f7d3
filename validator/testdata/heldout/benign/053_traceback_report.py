def risky(kind):
    if kind == "zero":
        return 1 / 0
    if kind == "key":
        return {}["missing"]
    if kind == "index":
        return [][3]
    if kind == "type":
        return "a" + 1
    if kind == "value":
        return int("x")
    if kind == "attr":
        return None.upper()
    return "fine"


results = []
for kind in args.get("kinds", ["zero", "key", "index", "type", "value", "attr", "ok"]):
    entry = {"kind": kind}
    try:
        entry["result"] = risky(kind)
        entry["status"] = "ok"
    except (ZeroDivisionError, LookupError) as e:
        entry.update(status="error", error=type(e).__name__, message=str(e), lookup=isinstance(e, LookupError))
    except Exception as e:
        entry.update(status="error", error=type(e).__name__, message=str(e), lookup=False)
    else:
        entry["clean"] = True
    finally:
        entry["checked"] = True
    results.append(entry)
summary = {"errors": sum(r["status"] == "error" for r in results), "traceback": None}
return {"results": results, "summary": summary}
