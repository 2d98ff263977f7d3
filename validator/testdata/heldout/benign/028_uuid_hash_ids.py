import base64
import hashlib
import uuid

names = args.get("names", ["alice", "bob", "carol"])
ns = uuid.UUID(args.get("namespace", "6ba7b810-9dad-11d1-80b4-00c04fd430c8"))
out = []
for name in names:
    digest = hashlib.sha256(name.encode()).digest()
    out.append({
        "name": name,
        "uuid5": str(uuid.uuid5(ns, name)),
        "sha256": hashlib.sha256(name.encode()).hexdigest()[:16],
        "md5": hashlib.md5(name.encode()).hexdigest(),
        "b64": base64.urlsafe_b64encode(digest[:9]).decode(),
        "blake2": hashlib.blake2b(name.encode(), digest_size=8).hexdigest(),
    })
return {"ids": out, "random_uuid_len": len(str(uuid.uuid4()))}
