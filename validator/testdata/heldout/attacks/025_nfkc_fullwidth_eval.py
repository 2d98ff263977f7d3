# goal: return os.getcwd() via fullwidth identifier normalising to eval
return ｅｖａｌ("__import__('os').getcwd()")
