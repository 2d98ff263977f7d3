package validator

import (
	"fmt"
	"strings"
)

// tcase is one entry of the shared corpus: the rule the Go checker must
// report ("" = the code must be accepted), and the allowlist to use.
type tcase struct {
	name  string
	rule  string
	code  string
	allow []string
}

// features is the language a case is checked with: a name starting
// "class: " is checked with classes on (Features.Classes).
func (c tcase) features() Features {
	return Features{Classes: strings.HasPrefix(c.name, "class: ")}
}

var stdAllow = []string{"re", "json", "math", "collections", "itertools", "datetime", "functools", "string", "operator", "statistics", "typing"}

// attacks: every entry must be rejected with the named rule.
var attacks = []tcase{
	// case C(a) reads the attributes named by C.__match_args__ (settable on
	// an ABC through copy's reducers: ('__globals__',) hands out globals).
	{"positional class pattern on an ABC", "positional-class-pattern", "import collections.abc\nf = len\nmatch f:\n    case collections.abc.Callable(g):\n        return g\nreturn 0", stdAllow},
	{"positional class pattern on an imported class", "positional-class-pattern", "from collections import OrderedDict\nmatch args:\n    case OrderedDict(a):\n        return a\nreturn 0", stdAllow},
	{"positional pattern on a rebound builtin", "positional-class-pattern", "import collections.abc\nint = collections.abc.Callable\nmatch len:\n    case int(g):\n        return g\nreturn 0", stdAllow},
	{"positional pattern on a builtin captured earlier", "positional-class-pattern", "match args:\n    case {'k': str}:\n        pass\nmatch len:\n    case str(g):\n        return g\nreturn 0", nil},
	// parse-error
	{"syntax error", "parse-error", "x = (1,\n", nil},
	{"missing colon", "parse-error", "if x\n    return 1\n", nil},
	{"null byte", "parse-error", "x = 1\x00\nreturn x", nil},
	{"py2 print", "parse-error", "print 'hi'\n", nil},
	{"py2 exec stmt", "forbidden-builtin", "exec 'import os'\n", nil},
	{"type alias 3.12", "parse-error", "type X = int\nreturn 1\n", nil},
	{"type params 3.12", "parse-error", "def f[T](x: T) -> T:\n    return x\nreturn f(1)\n", nil},
	{"fstring same quotes 3.12", "parse-error", "d = {'k': 1}\nreturn f\"{d[\"k\"]}\"\n", nil},
	{"fstring backslash 3.11", "parse-error", "return f\"{'\\n'.join(['a'])}\"\n", nil},
	{"fstring hash 3.11", "parse-error", "x = 1\nreturn f\"{x # c}\"\n", nil},
	{"statement walrus", "parse-error", "x := 1\n", nil},
	{"async as name", "parse-error", "async = 1\n", nil},
	{"bad hex escape", "parse-error", "return '\\x5'\n", nil},
	{"non-ascii bytes", "parse-error", "return b'caf\u00e9'\n", nil},
	// forbidden-builtin
	{"eval call", "forbidden-builtin", "return eval('1+1')", nil},
	{"exec call", "forbidden-builtin", "exec('import os')", nil},
	{"compile", "forbidden-builtin", "c = compile('1', 'x', 'eval')", nil},
	{"__import__", "forbidden-builtin", "os = __import__('os')", nil},
	{"open", "forbidden-builtin", "return open('/etc/passwd').read()", nil},
	{"globals", "forbidden-builtin", "return globals()", nil},
	{"locals", "forbidden-builtin", "return locals()", nil},
	{"vars", "forbidden-builtin", "return vars()", nil},
	{"input", "forbidden-builtin", "return input()", nil},
	{"breakpoint", "forbidden-builtin", "breakpoint()", nil},
	{"bare ref exec", "forbidden-builtin", "f = exec\nf('x=1')", nil},
	{"exec in list", "forbidden-builtin", "fs = [print, eval]\nreturn fs[1]('1')", nil},
	{"eval as default", "forbidden-builtin", "def f(g=eval):\n    return g('1')\nreturn f()", nil},
	{"eval in lambda default", "forbidden-builtin", "f = lambda g=eval: g('1')\nreturn f()", nil},
	{"eval in decorator", "forbidden-builtin", "@eval\ndef f():\n    pass\n", nil},
	{"eval in annotation", "forbidden-builtin", "def f(x: eval) -> int:\n    return 1\nreturn f(1)", nil},
	{"eval in fstring", "forbidden-builtin", "return f\"{eval('1')}\"", nil},
	{"eval nested fstring", "forbidden-builtin", "return f\"{f'{eval(chr(49))}'}\"", nil},
	{"eval in except", "forbidden-builtin", "try:\n    pass\nexcept eval:\n    pass\n", nil},
	{"eval in comprehension", "forbidden-builtin", "return [eval(x) for x in ['1']]", nil},
	{"eval in match guard", "forbidden-builtin", "match 1:\n    case 1 if eval('1'):\n        return 1\n", nil},
	{"global eval", "forbidden-builtin", "global eval\n", nil},
	{"nfkc eval", "forbidden-builtin", "return \uff45val('1')", nil},
	{"nfkc exec mathbold", "forbidden-builtin", "\U0001d41exec('x')", nil},
	{"from import eval", "forbidden-builtin", "from functools import eval\n", stdAllow},
	{"from import eval as", "forbidden-builtin", "from functools import eval as e\n", stdAllow},
	{"walrus eval", "forbidden-builtin", "if (f := eval):\n    pass\n", nil},
	{"star unpack eval", "forbidden-builtin", "a, *b = [1, eval]\n", nil},
	{"exit", "forbidden-builtin", "exit()", nil},
	// reflection-builtin
	{"getattr", "reflection-builtin", "return getattr(1, '__cla' + 'ss__')", nil},
	{"setattr", "reflection-builtin", "setattr(x, 'y', 1)", nil},
	{"delattr", "reflection-builtin", "delattr(x, 'y')", nil},
	{"hasattr computed", "reflection-builtin", "n = 'x'\nreturn hasattr(1, n)", nil},
	{"getattr computed", "reflection-builtin", "return getattr(1, '__cla' + args['x'])", nil},
	{"getattr dunder literal", "forbidden-string", "return getattr(1, '__class__')", nil},
	{"getattr private literal", "forbidden-string", "import random\nreturn getattr(random, '_os')", []string{"random"}},
	{"getattr introspection literal", "forbidden-string", "def g():\n    yield 1\nreturn getattr(g(), 'gi_frame')", nil},
	{"getattr dotted literal", "reflection-builtin", "return getattr(1, 'real.imag')", nil},
	{"getattr keyword", "reflection-builtin", "return getattr(1, 'real', default=None)", nil},
	{"type three args", "reflection-builtin", "return type('X', (), {})", nil},
	{"type bare", "reflection-builtin", "t = type\nreturn t", nil},
	{"type star args", "reflection-builtin", "return type(*args['a'])", nil},
	{"type bound only in a default", "reflection-builtin", "def f(x=type):\n    return x\nreturn type('X', (), {})", nil},
	{"eval bound only on the right", "forbidden-builtin", "x = eval\nreturn x('1')", nil},
	{"exec as a with value", "forbidden-builtin", "with exec:\n    pass\n", nil},
	{"exec as an except value", "forbidden-builtin", "try:\n    pass\nexcept exec:\n    pass\n", nil},
	{"eval only declared global", "forbidden-builtin", "def f():\n    global eval\n    return eval('1')\nreturn f()", nil},
	{"attrgetter literal", "forbidden-string", "import operator\nreturn operator.attrgetter('gi_frame.f_back')", stdAllow},
	{"methodcaller literal", "forbidden-string", "from operator import methodcaller\nreturn methodcaller('__reduce_ex__', 2)", stdAllow},
	{"wraps assigned list", "forbidden-string", "import functools\ndef g():\n    pass\nreturn functools.wraps(len, assigned=['__globals__'])(g)", stdAllow},
	{"type 3-arg", "reflection-builtin", "C = type('C', (), {})", nil},
	{"dir", "reflection-builtin", "return dir()", nil},
	{"super", "reflection-builtin", "return super()", nil},
	{"__build_class__", "reflection-builtin", "__build_class__", nil},
	{"type in isinstance third place", "reflection-builtin", "return isinstance(x, int, type)", nil},
	{"type class pattern", "reflection-builtin", "match args:\n    case type():\n        return 1\n", nil},
	{"nfkc getattr", "forbidden-string", "return \uff47etattr(1, '__class__')", nil},
	// dunder-attribute
	{"class attr", "dunder-attribute", "return ().__class__", nil},
	{"subclasses chain", "dunder-attribute", "return ().__class__.__base__.__subclasses__()", nil},
	{"globals via func", "dunder-attribute", "def f():\n    pass\nreturn f.__globals__", nil},
	{"__dict__", "dunder-attribute", "return args.__dict__", nil},
	{"__init__", "dunder-attribute", "return ''.__init__", nil},
	{"__self__ of builtin", "dunder-attribute", "return print.__self__", nil},
	{"__traceback__", "dunder-attribute", "try:\n    1/0\nexcept Exception as e:\n    return e.__traceback__\n", nil},
	{"__reduce_ex__", "dunder-attribute", "return (1).__reduce_ex__(2)", nil},
	{"__getattribute__", "dunder-attribute", "return ''.__getattribute__('x')", nil},
	{"nfkc dunder attr", "dunder-attribute", "return ().__\uff43lass__", nil},
	{"dunder in fstring", "dunder-attribute", "return f\"{().__class__}\"", nil},
	{"dunder in format spec", "dunder-attribute", "return f\"{1:{().__class__}}\"", nil},
	{"dunder class pattern", "dunder-attribute", "match args:\n    case object(__class__=c):\n        return 1\n", nil},
	{"dunder value pattern", "dunder-attribute", "match args:\n    case x.__class__:\n        return 1\n", nil},
	{"dunder from import", "dunder-attribute", "from json import __loader__\n", stdAllow},
	{"dunder import path", "dunder-attribute", "import json.__init__\n", stdAllow},
	{"tabs and spaces in one block", "parse-error", "if args:\n\tx = 1\n        y = 2\nreturn 1", nil},
	// dunder-name
	{"__builtins__", "dunder-name", "return __builtins__", nil},
	{"__loader__", "dunder-name", "return __loader__", nil},
	{"__spec__", "dunder-name", "return __spec__", nil},
	{"__file__", "dunder-name", "return __file__", nil},
	{"global builtins", "dunder-name", "global __builtins__\n", nil},
	{"def dunder", "dunder-name", "def __getattr__(n):\n    return n\n", nil},
	{"dunder kwarg", "dunder-name", "return dict(__class__=1)", nil},
	{"dunder param", "dunder-name", "f = lambda __x__: 1", nil},
	{"dunder except as", "dunder-name", "try:\n    pass\nexcept Exception as __e__:\n    pass\n", nil},
	// dunder-subscript
	{"subscript dunder", "dunder-subscript", "return d['__class__']", nil},
	{"subscript concat", "dunder-subscript", "return d['__cla' 'ss__']", nil},
	{"subscript plus", "dunder-subscript", "return d['__cla' + 'ss__']", nil},
	{"subscript paren plus", "dunder-subscript", "return d[('__cla') + ('ss__')]", nil},
	{"subscript hex escape", "dunder-subscript", "return d['\\x5f_class__']", nil},
	{"subscript octal escape", "dunder-subscript", "return d['\\137_class__']", nil},
	{"subscript unicode escape", "dunder-subscript", "return d['\\u005f_class__']", nil},
	{"subscript U escape", "dunder-subscript", "return d['\\U0000005f_class__']", nil},
	{"subscript N escape", "dunder-subscript", "return d['\\N{LOW LINE}\\N{low line}class__']", nil},
	{"subscript bytes", "dunder-subscript", "return d[b'__class__']", nil},
	{"subscript raw", "dunder-subscript", "return d[r'__globals__']", nil},
	{"subscript u prefix", "dunder-subscript", "return d[u'__builtins__']", nil},
	{"subscript fstring const", "dunder-subscript", "return d[f'__builtins__']", nil},
	{"subscript reserved", "dunder-subscript", "return d['_orq_execute']", nil},
	{"subscript in target", "dunder-subscript", "d['__builtins__'] = 1", nil},
	{"subscript triple", "dunder-subscript", "return d['''__class__''']", nil},
	// forbidden-string: literal arguments Python reads as attribute names
	{"attrgetter concat", "forbidden-string", "import operator\nreturn operator.attrgetter('gi_' 'frame')", stdAllow},
	{"attrgetter plus", "forbidden-string", "import operator\nreturn operator.attrgetter('a.' + '__globals__')", stdAllow},
	{"update_wrapper tuple", "forbidden-string", "import functools\ndef g():\n    pass\nreturn functools.update_wrapper(g, len, ('__globals__',))", stdAllow},
	// private-attribute
	{"private module attr", "private-attribute", "import random\nreturn random._os", []string{"random"}},
	{"private re compiler", "private-attribute", "import re\nreturn re._compiler", stdAllow},
	{"private from import", "private-attribute", "from collections import _sys\n", stdAllow},
	{"private import path", "private-attribute", "import json._x\n", stdAllow},
	{"private class pattern", "private-attribute", "match args:\n    case dict(_x=c):\n        return 1\n", nil},
	// reserved-name
	{"runner internals", "reserved-name", "return _orq_execute", nil},
	{"runner user fn", "reserved-name", "return __orq_user(args)", nil},
	{"reserved assignment", "reserved-name", "_orq_x = 1", nil},
	// introspection-attribute
	{"gi_frame", "introspection-attribute", "g = (x for x in [1])\nreturn g.gi_frame.f_back.f_globals", nil},
	{"f_back", "introspection-attribute", "return frame.f_back", nil},
	{"f_builtins", "introspection-attribute", "return frame.f_builtins", nil},
	{"f_locals", "introspection-attribute", "return frame.f_locals", nil},
	{"tb_frame", "introspection-attribute", "try:\n    1/0\nexcept Exception as e:\n    t = e\nreturn t.tb_frame", nil},
	{"tb_next", "introspection-attribute", "return tb.tb_next", nil},
	{"cr_frame", "introspection-attribute", "async def f():\n    pass\nreturn f().cr_frame", nil},
	{"ag_frame", "introspection-attribute", "async def f():\n    yield 1\nreturn f().ag_frame", nil},
	{"gi_yieldfrom", "introspection-attribute", "return g.gi_yieldfrom", nil},
	{"cr_await", "introspection-attribute", "return c.cr_await", nil},
	{"nfkc gi_frame", "introspection-attribute", "return g.gi_\uff46rame", nil},
	// code-object-attribute
	{"co_code", "code-object-attribute", "return c.co_code", nil},
	{"co_consts", "code-object-attribute", "return c.co_consts", nil},
	// module-attribute
	{"re.enum.sys", "module-attribute", "import re\nreturn re.enum.sys.modules", stdAllow},
	{"json.codecs", "module-attribute", "import json\nreturn json.codecs.open('/etc/passwd').read()", stdAllow},
	{"collections.abc.sys", "module-attribute", "import collections.abc\nreturn collections.abc.sys", stdAllow},
	{"from import os", "module-attribute", "from json import os\n", stdAllow},
	{"types attr", "module-attribute", "import re\nreturn re.enum.types", stdAllow},
	{"builtins attr", "module-attribute", "import re\nreturn re.functools.builtins", stdAllow},
	// reflection-attribute
	{"string.Formatter", "reflection-attribute", "import string\nreturn string.Formatter().format('{0}', 1)", stdAllow},
	{"get_type_hints", "reflection-attribute", "import typing\nreturn typing.get_type_hints(f)", stdAllow},
	{"mro", "reflection-attribute", "return int.mro()", nil},
	// format-string
	{"format traversal", "format-string", "return '{0.real}'.format(1)", nil},
	{"format index", "format-string", "return '{0[0]}'.format([1])", nil},
	{"format nested spec", "format-string", "return '{0:{1.real}}'.format(1, 2)", nil},
	{"format_map traversal", "format-string", "return '{x.real}'.format_map({'x': 1})", nil},
	{"format non-literal", "format-string", "t = '{0.re' + 'al}'\nt2 = t\nreturn t2.format(1)", nil},
	{"str.format unbound", "format-string", "return str.format('{0.real}', 1)", nil},
	{"format via map", "format-string", "return list(map('{0.real}'.format, [1]))", nil},
	{"format fstring receiver", "format-string", "a = 'x'\nreturn f'{a}'.format(1)", nil},
	{"format escaped braces fstring", "format-string", "return f'{{0.real}}'.format(1)", nil},
	{"format concat traversal", "format-string", "return ('{0.' 'real}').format(1)", nil},
	// import rules
	{"import os", "import-not-allowed", "import os\nreturn os.getcwd()", nil},
	{"import os aliased", "import-not-allowed", "import os as o\n", stdAllow},
	{"import os.path", "import-not-allowed", "import os.path\n", stdAllow},
	{"from os import", "import-not-allowed", "from os import system\n", stdAllow},
	{"from subprocess", "import-not-allowed", "from subprocess import run\n", stdAllow},
	{"import inside function", "import-not-allowed", "def f():\n    import sys\n    return sys\nreturn f()", stdAllow},
	{"nfkc import", "import-not-allowed", "import \uff4fs\n", stdAllow},
	{"future import", "import-not-allowed", "from __future__ import annotations\n", stdAllow},
	{"default deny", "import-not-allowed", "import re\n", nil},
	{"relative", "relative-import", "from . import x\n", stdAllow},
	{"relative dotted", "relative-import", "from ..json import x\n", stdAllow},
	{"star import", "star-import", "from json import *\n", stdAllow},
	// class-definition
	{"class", "class-definition", "class A:\n    pass\n", nil},
	{"class with metaclass", "class-definition", "class A(metaclass=M):\n    pass\n", nil},
	// attribute-write
	{"module poison", "attribute-write", "import json\njson.dumps = len\n", stdAllow},
	{"aug attr write", "attribute-write", "import math\nmath.pi += 1\n", stdAllow},
	{"del attr", "attribute-write", "import json\ndel json.loads\n", stdAllow},
	{"tuple target attr", "attribute-write", "import math\nmath.pi, x = 3, 4\n", stdAllow},
	{"for target attr", "attribute-write", "import math\nfor math.pi in [1]:\n    pass\n", stdAllow},
	{"comprehension target attr", "attribute-write", "import math\nreturn [1 for math.pi in [1]]", stdAllow},
	{"with target attr", "attribute-write", "import math\nwith x as math.pi:\n    pass\n", stdAllow},
	{"star target attr", "attribute-write", "import math\n*math.pi, = [1]\n", stdAllow},
	{"chained target attr", "attribute-write", "import math\na = math.e = 1\n", stdAllow},
	{"from-import module attr write", "attribute-write", "from collections import abc\nabc.Callable = 1\n", stdAllow},
	// class-keyword (classes on)
	{"class: metaclass keyword", "class-keyword", "class A(metaclass=M):\n    pass\n", nil},
	{"class: init_subclass keyword", "class-keyword", "class A(Base, flag=1):\n    pass\n", nil},
	{"class: splat keywords", "class-keyword", "kw = {}\nclass A(**kw):\n    pass\n", nil},
	// with classes on, the dunder rules still hold outside the ordinary methods
	{"class: getattr hook", "dunder-name", "class A:\n    def __getattr__(self, name):\n        return 1\n", nil},
	{"class: del hook", "dunder-name", "class A:\n    def __del__(self):\n        pass\n", nil},
	{"class: match_args", "dunder-name", "class A:\n    __match_args__ = ('__globals__',)\n", nil},
	{"class: init outside a class", "dunder-name", "def __init__(self):\n    pass\n", nil},
	{"class: method dunder read of globals", "dunder-attribute", "class A:\n    def __init__(self):\n        pass\nreturn A.__init__.__globals__", nil},
	{"class: module attr write", "attribute-write", "import json\nclass A:\n    pass\njson.A = A\n", stdAllow},
	// unsafe-helper (class creation by metaclass call, writes into sys.modules)
	{"abc metaclass call", "unsafe-helper", "import abc\nX = abc.ABCMeta('X', (), {'_' * 2 + 'del' + '_' * 2: print})\nreturn 1", []string{"abc"}},
	{"numbers ABCMeta", "unsafe-helper", "from numbers import ABCMeta\nreturn 1", []string{"numbers"}},
	{"enum EnumType call", "unsafe-helper", "import enum\nE = enum.EnumType\nreturn 1", []string{"enum"}},
	{"enum global_enum poison", "unsafe-helper", "import enum, json\nE = enum.Enum('E', {'dumps': 1}, module='json')\nenum.global_enum(E)\nreturn 1", []string{"enum", "json"}},
	{"typing NamedTupleMeta", "unsafe-helper", "import typing\nX = typing.NamedTupleMeta('X', (), {})\nreturn 1", stdAllow},
	{"singledispatchmethod", "unsafe-helper", "import functools\nm = functools.singledispatchmethod(print)\nreturn 1", stdAllow},
	// published techniques the rules above stop (the run-time half is in
	// plugins/subprocess/redteam_test.go)
	{"update_wrapper updated globals", "forbidden-string", "import functools, json\ndef g():\n    pass\nfunctools.update_wrapper(g, json.loads, (), ['__globals__'])\nreturn g.__globals__['codecs']", stdAllow},
	{"string formatter get_field", "reflection-attribute", "import string\nreturn string.Formatter().get_field('0.__class__', [1], {})", stdAllow},
	{"methodcaller format", "format-string", "import operator\nreturn operator.methodcaller('format', 1)('{0.real}')", stdAllow},
	{"getattr format", "format-string", "t = args['t']\nreturn getattr(t, 'format')(1)", nil},
	{"attrgetter format_map", "format-string", "from operator import attrgetter\nreturn attrgetter('format_map')(args['t'])({})", stdAllow},
	{"get_type_hints", "reflection-attribute", "import typing\ndef f(x: 'int'):\n    pass\nreturn typing.get_type_hints(f)", stdAllow},
	{"exception traceback frame", "introspection-attribute", "try:\n    1 / 0\nexcept Exception as e:\n    return e.with_traceback(None)", nil},
	{"except star traceback", "dunder-attribute", "try:\n    1 / 0\nexcept* ZeroDivisionError as eg:\n    return eg.__traceback__\n", nil},
	{"coroutine frame", "introspection-attribute", "async def f():\n    return 1\nreturn f().cr_frame.f_back", nil},
	{"async generator frame", "introspection-attribute", "async def f():\n    yield 1\nreturn f().ag_frame", nil},
	{"random private os", "private-attribute", "import random\nreturn random._os.system('id')", []string{"random"}},
	{"re internals", "private-attribute", "import re\nreturn re._compiler", stdAllow},
	{"json codecs open", "module-attribute", "import json\nreturn json.codecs.open('/etc/hostname').read()", stdAllow},
	{"typing sys", "module-attribute", "import typing\nreturn typing.sys.modules", stdAllow},
	{"site builtins license", "forbidden-builtin", "return help", nil},
	// carriage returns
	{"bare CR line end", "forbidden-builtin", "x = 1\rreturn eval('x')", nil},
	{"CR hides import", "import-not-allowed", "x = 1\rimport os", nil},
	// limits
	{"too deep", "nesting-too-deep", "return " + deepParens(600), nil},
}

func deepParens(n int) string {
	s := ""
	for i := 0; i < n; i++ {
		s += "("
	}
	s += "1"
	for i := 0; i < n; i++ {
		s += ")"
	}
	return s
}

// benign: LLM-style tool bodies that must be accepted.
var benign = []tcase{
	// strings and keys are data
	{"attrgetter plain names", "", "import operator\nrows = args.get('rows', [])\nreturn [operator.attrgetter('real')(1), sorted(rows, key=operator.itemgetter('age'))]", stdAllow},
	{"methodcaller plain name", "", "from operator import methodcaller, attrgetter\nreturn list(map(methodcaller('upper'), ['a'])) + [attrgetter('imag')(1)]", stdAllow},
	{"data keys that are module names", "", "row = args['row']\nreturn [row['site'], row['os'], row['warnings'], row['traceback'], row['logging'], row['signal']]", nil},
	{"data key co_name", "", "rows = args['rows']\nreturn [r['co_name'] for r in rows]", nil},
	{"subscript introspection word", "", "d = {'f_globals': 1}\nreturn d['f_globals']", nil},
	{"dunder words in strings", "", "return ['__main__', '__init__.py', 'a __bold__ word', \"x = ['__class__']\".upper()]", nil},
	{"docstring mentions a dunder", "", "\"\"\"Build a Foo; see Foo.__init__ and gen.gi_frame.\"\"\"\nreturn 1", nil},
	{"dunder words in fstrings", "", "n = 1\nreturn f'{n}__class__ {n:>4}'", nil},
	{"mapping pattern key", "", "match args:\n    case {'__class__': c}:\n        return 1\nreturn 0", nil},
	{"fstring hash inside a string", "", "level = 2\ntitle = 't'\nreturn f\"{'#' * level} {title}\"", nil},
	// builtins in their allowed shapes; local names reuse builtin names
	{"getattr with a default", "", "p = args\nreturn getattr(p, 'name', None)", nil},
	{"hasattr plain name", "", "return hasattr(args, 'keys')", nil},
	{"type of an exception", "", "try:\n    1 / 0\nexcept Exception as e:\n    return type(e).__name__\n", nil},
	{"type as a class check", "", "x = args.get('x')\nreturn [isinstance(x, type), isinstance(x, (int, type)), issubclass(int, type)]", nil},
	{"type of a generator argument", "", "return type(x for x in [1]).__name__", nil},
	{"shadowed builtins", "", "type = args.get('type')\ninput = args.get('input', '')\ndir = 'up'\nexit = False\nproperty = {}\nreturn [type, input, dir, exit, property]", nil},
	{"compile shadowed by re.compile", "", "import re\nfrom re import compile\nreturn compile('a+').findall('aaa')", stdAllow},
	{"builtin names as parameters", "", "def f(type, input=None, *vars, **globals):\n    return type, input, vars, globals\nreturn f(1)", nil},
	{"a tab-indented function next to a space-indented one", "", "def a():\n\treturn 1\n\ndef b():\n    if True:\n        return 2\n\nreturn a() + b()", nil},
	{"tabs in one block, continuation lines aligned with spaces", "", "def a(x):\n\ty = [x,\n          x]\n\treturn y\nreturn a(1)", nil},
	{"a 300-term sum", "", "x = 1\nreturn " + strings.Repeat("x + ", 299) + "x", nil},
	{"a 300-branch elif chain", "", "x = args.get('x', 0)\nif x == 0:\n    y = 0\n" + elifChain(300) + "else:\n    y = -1\nreturn y", nil},
	{"builtin names in loops and patterns", "", "for type in ['a']:\n    pass\nmatch args:\n    case {'eval': eval}:\n        return eval\nreturn [open for open in [1]]", nil},
	{"positional patterns on builtin types", "", "def kind(v):\n    match v:\n        case bool(b):\n            return ['bool', b]\n        case int(n) | float(n):\n            return ['number', n + 1]\n        case str(s):\n            return ['text', s.upper()]\n        case [int(a), int(b)]:\n            return ['pair', a + b]\n        case {'type': str(t)}:\n            return ['typed', t]\n        case _:\n            return ['other', None]\nreturn [kind(x) for x in [True, 2, 'a', [1, 2], {'type': 'x'}, None]]", nil},
	{"return arithmetic", "", "return 1 + 1", nil},
	{"args access", "", "return args['a'] + args.get('b', 0)", nil},
	{"re findall", "", "import re\nreturn re.findall(r'\\d+', args['text'])", stdAllow},
	{"json roundtrip", "", "import json\ndata = json.loads(args['s'])\nreturn json.dumps(data, sort_keys=True, indent=2)", stdAllow},
	{"math", "", "import math\nreturn {'r': math.sqrt(16), 'pi': round(math.pi, 3), 'f': math.floor(2.5)}", stdAllow},
	{"collections", "", "from collections import Counter, defaultdict, OrderedDict, deque, namedtuple\nc = Counter(args['words'])\nd = defaultdict(list)\nfor w in args['words']:\n    d[len(w)].append(w)\nP = namedtuple('P', ['x', 'y'])\np = P(1, 2)\nq = p._replace(x=3)\nreturn {'top': c.most_common(2), 'd': dict(d), 'p': q._asdict(), 'f': list(P._fields)}", stdAllow},
	{"itertools", "", "import itertools\npairs = list(itertools.combinations([1, 2, 3], 2))\nacc = list(itertools.accumulate([1, 2, 3]))\ngroups = {k: list(g) for k, g in itertools.groupby(sorted('aabbc'))}\nreturn [pairs, acc, groups, list(itertools.islice(itertools.count(), 3))]", stdAllow},
	{"datetime", "", "from datetime import datetime, timedelta, timezone\nd = datetime(2024, 1, 2, tzinfo=timezone.utc)\nreturn (d + timedelta(days=3)).isoformat() + d.strftime('%Y-%m-%d')", stdAllow},
	{"datetime module", "", "import datetime as dt\nreturn dt.date(2024, 1, 1).weekday()", stdAllow},
	{"nested fstrings", "", "name = 'x'\nitems = [1, 2]\nreturn f\"{name!r}: {', '.join(f'{i:03d}' for i in items)} {len(items):>{4}}\"", nil},
	{"fstring format spec", "", "v = 3.14159\nw = 10\nreturn f'{v:.2f} {v:{w}.{2}f} {255:#x} {1000000:,} {v=}'", nil},
	{"comprehensions", "", "xs = args['xs']\nsq = [x * x for x in xs if x % 2 == 0]\nd = {x: x ** 2 for x in xs}\ns = {x % 3 for x in xs}\ng = sum(x for x in xs)\nm = [[i * j for j in range(3)] for i in range(3)]\nreturn [sq, d, sorted(s), g, m]", nil},
	{"walrus", "", "data = [1, 2, 3, 4]\nif (n := len(data)) > 3:\n    return [y for x in data if (y := x * 2) > 4] + [n]\nreturn n", nil},
	{"match", "", "cmd = args.get('cmd', {'op': 'add', 'a': 1, 'b': 2})\nmatch cmd:\n    case {'op': 'add', 'a': a, 'b': b}:\n        return a + b\n    case {'op': 'neg', 'a': a}:\n        return -a\n    case [first, *rest]:\n        return first\n    case str() | bytes() as s:\n        return s\n    case int(real=r) if r > 0:\n        return r\n    case _:\n        return None", nil},
	{"lambdas sorted key", "", "people = [{'name': 'b', 'age': 3}, {'name': 'a', 'age': 3}]\nreturn sorted(people, key=lambda p: (p['age'], p['name']), reverse=True)", nil},
	{"operator itemgetter", "", "from operator import itemgetter\nimport operator\nrows = [(1, 'b'), (0, 'a')]\nreturn sorted(rows, key=itemgetter(1)) + [operator.add(1, 2)]", stdAllow},
	{"nested functions closures", "", "def make_counter():\n    count = 0\n    def inc(step=1):\n        nonlocal count\n        count += step\n        return count\n    return inc\nc = make_counter()\nc()\nreturn c(2)", nil},
	{"recursion", "", "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\nreturn fib(10)", nil},
	{"generators", "", "def gen(n):\n    for i in range(n):\n        yield i * i\n    yield from range(2)\ng = gen(3)\nfirst = next(g)\nreturn [first] + list(g)", nil},
	{"try except", "", "try:\n    x = 1 / args.get('d', 0)\nexcept ZeroDivisionError as e:\n    return {'error': str(e), 'args': list(e.args)}\nexcept (KeyError, ValueError):\n    return None\nelse:\n    return x\nfinally:\n    pass", nil},
	{"raise custom", "", "def check(x):\n    if x < 0:\n        raise ValueError(f'negative: {x}')\n    return x\ntry:\n    check(-1)\nexcept ValueError as err:\n    return repr(err)", nil},
	{"type hints", "", "from typing import Optional, List, Dict\ndef f(xs: List[int], scale: Optional[float] = None) -> Dict[str, float]:\n    s: float = scale or 1.0\n    return {'total': sum(xs) * s}\nreturn f([1, 2])", stdAllow},
	{"builtin generic hints", "", "def f(xs: list[int] | None = None) -> dict[str, int]:\n    return {'n': len(xs or [])}\nreturn f()", nil},
	{"keyword type arg", "", "return dict(type='object', input=1, open=2, compile=3, vars=4, format=5)", nil},
	{"json schema keys", "", "schema = {'type': 'object', 'properties': {'id': {'type': 'string'}}}\nreturn schema['type']", nil},
	{"re.compile attr", "", "import re\np = re.compile(r'(?P<year>\\d{4})-(?P<m>\\d{2})')\nm = p.match('2024-05')\nreturn m.group('year') if m else None", stdAllow},
	{"str format literal", "", "return '{} + {} = {:>5.2f} {name}'.format(1, 2, 3.0, name='x') + '{0:{1}}'.format(3, 4) + '{{literal}}'.format()", nil},
	{"format builtin", "", "return format(3.14159, '.2f') + format(255, '#x')", nil},
	{"percent format", "", "return '%s=%d %(a)s' % ('x', 1) if False else '%(a)s' % {'a': 1}", nil},
	{"string module", "", "import string\nreturn string.ascii_lowercase[:3] + string.Template('$x').substitute(x=1)", stdAllow},
	{"underscore vars", "", "_cache = {}\nfor _ in range(3):\n    _cache[_] = _ * 2\n_, b = 1, 2\ndef _helper(x):\n    return x\nreturn _helper(_cache)", nil},
	{"private key strings", "", "doc = {'_id': 1, '_meta': {'co_name': 'acme'}}\nreturn doc['_id']", nil},
	{"dunder allowlist", "", "def f():\n    'doc'\n    return 1\nreturn [f.__name__, f.__doc__, f.__qualname__]", nil},
	{"dict methods", "", "d = dict(a=1)\nd.update(b=2)\nd.setdefault('c', 3)\nreturn {k: v for k, v in sorted(d.items())}", nil},
	{"string methods", "", "s = '  Hello, World  '\nreturn [s.strip().lower(), s.split(','), s.replace('l', 'L'), s.startswith(' '), '-'.join(['a', 'b']), s.encode('utf-8').decode()]", nil},
	{"statistics", "", "import statistics\nreturn statistics.mean([1, 2, 3]) + statistics.median([1, 2])", stdAllow},
	{"functools", "", "from functools import reduce, lru_cache, partial\n@lru_cache(maxsize=None)\ndef f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)\nadd = partial(lambda a, b: a + b, 1)\nreturn [reduce(lambda a, b: a * b, [1, 2, 3]), f(20), add(2)]", stdAllow},
	{"decorator user", "", "def deco(fn):\n    def wrapper(*a, **kw):\n        return fn(*a, **kw) * 2\n    return wrapper\n@deco\ndef g(x):\n    return x\nreturn g(2)", nil},
	{"star unpacking", "", "first, *middle, last = [1, 2, 3, 4]\nmerged = {**{'a': 1}, **{'b': 2}}\nreturn [first, middle, last, merged, [*range(2), *'ab']]", nil},
	{"while loop", "", "n = 10\nsteps = 0\nwhile n != 1:\n    n = n // 2 if n % 2 == 0 else 3 * n + 1\n    steps += 1\nelse:\n    pass\nreturn steps", nil},
	{"global-free with", "", "import contextlib\nreturn 1", []string{"contextlib"}},
	{"isinstance checks", "", "x = args.get('x', 1)\nif isinstance(x, (int, float)) and not isinstance(x, bool):\n    return x * 2\nreturn issubclass(bool, int)", nil},
	{"bytes ops", "", "b = b'abc'\nba = bytearray(b)\nba[0] = 65\nreturn [b.hex(), bytes(ba).decode('ascii'), b'\\x41'.decode()]", nil},
	{"escapes in strings", "", "s = 'tab\\there\\nnew \\u00e9 \\N{EM DASH} \\x41'\nreturn len(s)", nil},
	{"docstring mentions", "", "def f():\n    \"\"\"Compute the thing; uses a cache (see notes).\"\"\"\n    return 1\nreturn f()", nil},
	{"crlf source", "", "x = 1\r\ny = 2\r\nreturn x + y\r\n", nil},
	{"async def defined", "", "async def f():\n    return 1\nreturn 2", nil},
	{"print", "", "print('hello', 1, sep=', ', end='\\n')\nreturn None", nil},
	{"attribute reads", "", "import math\nx = (1.5).real\nreturn [math.inf > 0, x, (3).bit_length(), 'a'.upper()]", stdAllow},
	{"subscript writes", "", "d = {}\nd['k'] = 1\nxs = [0, 0]\nxs[0] += 1\ndel d['k']\nreturn xs", nil},
	{"conditional imports", "", "try:\n    import json\nexcept ImportError:\n    json = None\nreturn json is not None", stdAllow},
	{"chained comparisons", "", "x = 5\nreturn 0 < x < 10 and x not in [1, 2] and x is not None", nil},
	{"set and frozenset", "", "a = {1, 2}\nb = frozenset([2, 3])\nreturn sorted(a | b) + sorted(a & b)", nil},
	{"dataclass-free record", "", "from collections import namedtuple\nPoint = namedtuple('Point', 'x y')\nreturn Point(1, 2)._asdict()", stdAllow},
	{"enumerate zip", "", "names = ['a', 'b']\nvals = [1, 2]\nreturn {i: (n, v) for i, (n, v) in enumerate(zip(names, vals))}", nil},
	{"slicing", "", "s = list(range(10))\nreturn [s[::2], s[-3:], s[1:5:2], s[slice(2)]]", nil},
	{"ternary and any", "", "xs = args.get('xs', [1])\nreturn 'yes' if any(x > 0 for x in xs) and all(xs) else 'no'", nil},
	{"complex numbers", "", "z = complex(1, 2)\nreturn [abs(z), z.real, z.imag, divmod(7, 2), pow(2, 10, 7)]", nil},
	{"heapq bisect", "", "import heapq, bisect\nh = [5, 1, 3]\nheapq.heapify(h)\nreturn [heapq.heappop(h), bisect.bisect_left([1, 3, 5], 3)]", []string{"heapq", "bisect"}},
	{"unicode identifiers", "", "café = 1\nπ = 3.14\nreturn café + π", nil},
	{"match class positional", "", "match (1, 2):\n    case (int(a), int(b)):\n        return a + b", nil},
	{"except star", "", "try:\n    pass\nexcept* ValueError:\n    pass\nreturn 1", nil},
	{"textwrap and decimal", "", "import textwrap\nfrom decimal import Decimal, ROUND_HALF_UP\nreturn [textwrap.shorten('hello world foo', 10), str(Decimal('1.25').quantize(Decimal('0.1'), rounding=ROUND_HALF_UP))]", []string{"textwrap", "decimal"}},
	{"uuid hashlib", "", "import hashlib, base64\nreturn [hashlib.sha256(b'x').hexdigest(), base64.b64encode(b'hi').decode()]", []string{"hashlib", "base64"}},
	{"comments everywhere", "", "# leading comment\nx = [  # trailing\n    1,  # one\n]\nreturn x  # done", nil},
	{"line continuation", "", "x = 1 + \\\n    2\nreturn x", nil},
	{"lambda in dict", "", "ops = {'+': lambda a, b: a + b, '-': lambda a, b: a - b}\nreturn ops['+'](1, 2)", nil},
	{"assert", "", "assert args is not None, 'need args'\nreturn True", nil},
	{"global name", "", "def f():\n    global counter\n    counter = 1\nf()\nreturn 1", nil},
	{"callable iter next", "", "it = iter([1, 2])\nreturn [next(it), callable(len), hash('a') == hash('a'), ascii('é'), hex(1), oct(8), bin(2), chr(65), ord('A')]", nil},
	{"object sentinel", "", "_missing = object()\nreturn args.get('k', _missing) is _missing", nil},
	{"functools wraps decorator", "", "import functools\ndef logged(fn):\n    @functools.wraps(fn)\n    def inner(*a, **kw):\n        return fn(*a, **kw)\n    return inner\n@logged\ndef add(a, b):\n    'Add.'\n    return a + b\nreturn [add(1, 2), add.__name__, add.__doc__]", stdAllow},
	{"singledispatch by annotation", "", "from functools import singledispatch\n@singledispatch\ndef show(x):\n    return 'obj'\n@show.register\ndef _(x: int):\n    return 'int'\n@show.register(str)\ndef _(x):\n    return 'str'\nreturn [show(1), show('a'), show(1.5)]", stdAllow},
	{"enum functional api", "", "import enum\nColor = enum.Enum('Color', 'RED GREEN')\nreturn [c.name for c in Color]", []string{"enum"}},
	{"abc collections checks", "", "from collections.abc import Mapping, Sequence\nreturn [isinstance({}, Mapping), isinstance([], Sequence)]", stdAllow},
	{"function attribute", "", "def fib(n):\n    if n in fib.cache:\n        return fib.cache[n]\n    r = n if n < 2 else fib(n - 1) + fib(n - 2)\n    fib.cache[n] = r\n    return r\nfib.cache = {}\nreturn fib(30)", nil},
	{"class: custom exception", "", "class ToolError(Exception):\n    def __init__(self, msg, code=1):\n        super().__init__(msg)\n        self.code = code\ntry:\n    raise ToolError('bad', 2)\nexcept ToolError as e:\n    return [str(e), e.code, type(e).__name__]", nil},
	{"class: dataclass records", "", "from dataclasses import dataclass, field, asdict\n@dataclass(order=True)\nclass Item:\n    name: str\n    qty: int = 0\n    tags: list = field(default_factory=list)\nitems = sorted([Item('b', 2), Item('a', 1)])\nreturn [asdict(i) for i in items]", []string{"dataclasses"}},
	{"class: ordinary methods", "", "class Stack:\n    def __init__(self):\n        self.items = []\n    def __len__(self):\n        return len(self.items)\n    def __repr__(self):\n        return f'Stack({self.items!r})'\n    def __eq__(self, other):\n        return isinstance(other, Stack) and self.items == other.items\n    __hash__ = None\n    def push(self, x):\n        self.items.append(x)\n        return self\n    @property\n    def top(self):\n        return self.items[-1]\n    @staticmethod\n    def make():\n        return Stack()\n    @classmethod\n    def of(cls, *xs):\n        s = cls()\n        for x in xs:\n            s.push(x)\n        return s\ns = Stack.of(1, 2)\nreturn [len(s), s.top, repr(s), s == Stack.make().push(1).push(2)]", nil},
	{"class: inheritance", "", "class Shape:\n    def area(self):\n        raise NotImplementedError\nclass Sq(Shape):\n    def __init__(self, s):\n        Shape.__init__(self)\n        self.s = s\n    def area(self):\n        return self.s ** 2\nreturn [Sq(3).area(), isinstance(Sq(1), Shape)]", nil},
	{"class: enum and namedtuple", "", "import enum, typing\nclass Color(enum.Enum):\n    RED = 1\n    GREEN = 2\nclass P(typing.NamedTuple):\n    x: int\n    y: int = 0\nreturn [Color.RED.name, P(1)._asdict()]", []string{"enum", "typing"}},
	{"datetime strptime strftime", "", "import datetime\nd = datetime.datetime.strptime('2024-05-01', '%Y-%m-%d')\nreturn [d.strftime('%d/%m/%Y'), d.isoformat()]", []string{"datetime"}},
}

// elifChain returns n `elif x == i:` branches.
func elifChain(n int) string {
	var b strings.Builder
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "elif x == %d:\n    y = %d\n", i, i)
	}
	return b.String()
}
