# goal: return os.environ repr via exception traceback tb_frame.f_back.f_globals
try:
    1 / 0
except Exception as e:
    f = e.__traceback__.tb_frame
    while f.f_back is not None:
        f = f.f_back
    return repr(f.f_globals["__builtins__"].__dict__["__import__"]("os").environ)
