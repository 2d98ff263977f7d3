def normalise(s):
	"""This helper is indented with tabs."""
	out = []
	for ch in s:
		if ch.isalnum():
			out.append(ch.lower())
		elif out and out[-1] != "-":
			out.append("-")
	return "".join(out).strip("-")


def words(s):
    """This helper uses four spaces."""
    result = []
    for w in s.split():
        if len(w) > 2:
            result.append(w)
    return result


title = args.get("title", "Hello, World!  This is a   Test of slugs")
return {"slug": normalise(title), "words": words(title)}
