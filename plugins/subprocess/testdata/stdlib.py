# The body of a tool that exercises every standard library module the
# seccomp allowlist was derived for (runner/seccomp: allowedCalls), with
# threads, sleeps, clocks, random bytes and timezone files. Run with the
# Python layers bypassed (threading and io are not importable otherwise).
import json, re, math, datetime, collections, itertools, functools, decimal, fractions
import statistics, random, hashlib, base64, string, textwrap, dataclasses, typing, enum
import heapq, bisect, copy, operator, time, zlib, struct, uuid, csv, io, unicodedata
import difflib, threading, zoneinfo, html, binascii, array, hmac, secrets, calendar
r = {}
r["json"] = json.loads(json.dumps({"a": [1, 2.5, None, "é"]}))
r["re"] = re.findall(r"\d+", "a1 b22 c333")
r["math"] = [math.sqrt(2), math.factorial(20), math.gcd(12, 18), math.isclose(0.1 + 0.2, 0.3)]
now = datetime.datetime.now()
utc = datetime.datetime.now(datetime.timezone.utc)
r["datetime"] = [now.year > 2000, utc.isoformat()[:4], datetime.date(2024, 2, 29).isoformat(),
                 datetime.datetime.strptime("2024-03-01 12:00", "%Y-%m-%d %H:%M").strftime("%A %B")]
try:
    r["zoneinfo"] = datetime.datetime(2024, 6, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")).utcoffset().seconds
except Exception as e:
    r["zoneinfo"] = "err " + type(e).__name__
r["localtime"] = time.localtime().tm_year > 2000
r["collections"] = [collections.Counter("abracadabra").most_common(2), list(collections.deque([1, 2, 3], maxlen=2)),
                    collections.OrderedDict(a=1), dict(collections.defaultdict(int, x=1))]
r["itertools"] = [list(itertools.permutations("abc", 2))[:3], list(itertools.accumulate([1, 2, 3]))]
@functools.lru_cache(maxsize=None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
r["functools"] = [fib(80), functools.reduce(operator.mul, range(1, 10))]
r["decimal"] = str(decimal.Context(prec=40).divide(decimal.Decimal(1), decimal.Decimal(7)))
r["fractions"] = str(fractions.Fraction(3, 4) + fractions.Fraction(1, 6))
r["statistics"] = [statistics.mean([1, 2, 3, 4]), statistics.stdev([1, 2, 3, 4]), statistics.median([3, 1, 2])]
rnd = random.Random(42)
random.seed()
r["random"] = [rnd.randint(0, 100), random.random() < 1, len(secrets.token_hex(8)), random.SystemRandom().random() < 1]
r["hashlib"] = [hashlib.sha256(b"x").hexdigest()[:8], hashlib.md5(b"x").hexdigest()[:8],
                hashlib.blake2b(b"x").hexdigest()[:8], hashlib.sha3_256(b"x").hexdigest()[:8],
                hashlib.pbkdf2_hmac("sha256", b"pw", b"salt", 1000).hex()[:8],
                hmac.new(b"k", b"m", "sha256").hexdigest()[:8]]
r["base64"] = [base64.b64encode(b"hello").decode(), base64.b32encode(b"hi").decode(), binascii.crc32(b"x")]
r["string"] = string.Template("$a-$b").substitute(a=1, b=2) + string.ascii_letters[:3]
r["textwrap"] = textwrap.wrap("the quick brown fox jumps over the lazy dog", 10)
P = dataclasses.make_dataclass("P", [("x", int), ("y", typing.Optional[int], dataclasses.field(default=None))], frozen=True)
r["dataclasses"] = dataclasses.asdict(P(1, 2))
Color = enum.Enum("Color", "RED GREEN")
r["enum"] = [c.name for c in Color]
h = [5, 1, 4]
heapq.heapify(h)
r["heapq"] = [heapq.heappop(h), heapq.nlargest(2, [1, 9, 3])]
r["bisect"] = bisect.bisect_left([1, 3, 5], 4)
r["copy"] = copy.deepcopy({"a": [1, {"b": 2}]})
r["operator"] = sorted([(1, "b"), (0, "a")], key=operator.itemgetter(1))
t0 = time.time(); m0 = time.monotonic(); p0 = time.perf_counter(); c0 = time.process_time()
time.sleep(0.01)
r["time"] = [time.time() >= t0, time.monotonic() > m0, time.perf_counter() > p0, time.process_time() >= c0,
             time.thread_time() >= 0, time.strftime("%Y", time.gmtime(0)), time.monotonic_ns() > 0]
z = zlib.compress(b"abc" * 1000, 9)
r["zlib"] = [len(z) < 100, zlib.decompress(z)[:3].decode(), zlib.adler32(b"x")]
r["struct"] = list(struct.unpack("<IhQd", struct.pack("<IhQd", 1, -2, 3, 4.5)))
r["uuid"] = [len(str(uuid.uuid4())), str(uuid.uuid5(uuid.NAMESPACE_DNS, "example.com")), str(uuid.uuid3(uuid.NAMESPACE_URL, "x"))[:8]]
try:
    r["uuid1"] = uuid.uuid1().version
except Exception as e:
    r["uuid1"] = "err " + type(e).__name__
buf = io.StringIO()
w = csv.writer(buf)
w.writerows([["a", "b"], [1, "x,y"]])
r["csv"] = list(csv.reader(io.StringIO(buf.getvalue())))
bio = io.BytesIO(); bio.write(b"abc"); bio.seek(0)
r["io"] = [bio.read().decode(), io.TextIOWrapper(io.BytesIO(b"l1\nl2\n"), encoding="utf-8").readlines()]
r["unicodedata"] = [unicodedata.name("é"), unicodedata.normalize("NFKD", "ﬁ")]
r["difflib"] = list(difflib.unified_diff(["a\n", "b\n"], ["a\n", "c\n"]))[:3]
r["html"] = html.escape("<a href='x'>")
r["array"] = array.array("d", [1.0, 2.0]).tolist()
r["calendar"] = calendar.monthrange(2024, 2)
results = []
lock = threading.Lock()
cond = threading.Condition()
ev = threading.Event()
local = threading.local()
def work(i):
    s = sum(k * k for k in range(20000))
    with lock:
        results.append((i, s, getattr(local, 'v', None)))
    time.sleep(0.001)
ths = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for th in ths:
    th.start()
for th in ths:
    th.join()
tm = threading.Timer(0.005, ev.set)
tm.start()
r["threading"] = [len(results), ev.wait(2), threading.active_count() >= 1, threading.get_ident() > 0]
sem = threading.BoundedSemaphore(2)
with sem:
    pass
b = threading.Barrier(1)
b.wait()
return r
