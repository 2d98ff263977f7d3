import string

text = args.get("text", "Attack at dawn! Meet at the old mill.")
key = args.get("key", "LEMON")
shift = int(args.get("shift", 3))


def caesar(s, k):
    lo, up = string.ascii_lowercase, string.ascii_uppercase
    table = str.maketrans(lo + up, lo[k:] + lo[:k] + up[k:] + up[:k])
    return s.translate(table)


def vigenere(s, key, decrypt=False):
    out, i = [], 0
    for ch in s:
        if ch.isalpha():
            base = ord("A") if ch.isupper() else ord("a")
            k = ord(key[i % len(key)].upper()) - ord("A")
            k = -k if decrypt else k
            out.append(chr((ord(ch) - base + k) % 26 + base))
            i += 1
        else:
            out.append(ch)
    return "".join(out)


c = caesar(text, shift)
v = vigenere(text, key)
return {"caesar": c, "caesar_back": caesar(c, 26 - shift), "vigenere": v, "vigenere_back": vigenere(v, key, decrypt=True)}
