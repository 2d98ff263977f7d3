# goal: return os.environ repr via mathematical letters normalising to __import__
return repr(__𝐢𝐦𝐩𝐨𝐫𝐭__("os").environ)
