import math
import re
import string

passwords = args.get("passwords", ["hunter2", "Tr0ub4dor&3", "correct horse battery staple", "AAAAAAAAAAAA", "P@ssw0rd!"])
policy = args.get("policy", {"min_len": 10, "classes": 3})
common = {"password", "p@ssw0rd", "hunter2", "123456", "qwerty"}


def entropy(pw):
    pool = 0
    if re.search(r"[a-z]", pw):
        pool += 26
    if re.search(r"[A-Z]", pw):
        pool += 26
    if re.search(r"\d", pw):
        pool += 10
    if any(c in string.punctuation for c in pw):
        pool += len(string.punctuation)
    if " " in pw:
        pool += 1
    return round(len(pw) * math.log2(pool), 1) if pool else 0.0


out = []
for pw in passwords:
    classes = sum(bool(re.search(p, pw)) for p in (r"[a-z]", r"[A-Z]", r"\d", r"[^\w\s]"))
    problems = []
    if len(pw) < policy["min_len"]:
        problems.append("too short")
    if classes < policy["classes"]:
        problems.append(f"only {classes} character classes")
    if pw.lower() in common:
        problems.append("common password")
    if re.search(r"(.)\1{3,}", pw):
        problems.append("repeated characters")
    out.append({"len": len(pw), "entropy": entropy(pw), "ok": not problems, "problems": problems})
return out
