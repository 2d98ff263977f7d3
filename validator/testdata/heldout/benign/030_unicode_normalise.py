import unicodedata

samples = args.get("samples", ["Crème Brûlée", "ﬁancé", "Ｆｕｌｌｗｉｄｔｈ", "naïve café", "Ångström"])
out = []
for s in samples:
    nfkd = unicodedata.normalize("NFKD", s)
    ascii_ = "".join(c for c in nfkd if not unicodedata.combining(c))
    out.append({
        "input": s,
        "nfc": unicodedata.normalize("NFC", s),
        "nfkc": unicodedata.normalize("NFKC", s),
        "ascii": ascii_.encode("ascii", "ignore").decode(),
        "categories": sorted({unicodedata.category(c) for c in s}),
        "first_name": unicodedata.name(s[0], "?"),
    })
return out
