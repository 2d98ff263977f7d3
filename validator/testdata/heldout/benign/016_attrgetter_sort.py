import operator
from dataclasses import dataclass


@dataclass(frozen=True)
class Person:
    name: str
    age: int
    city: str


people = [Person(**p) for p in args.get("people", [
    {"name": "Zoe", "age": 31, "city": "Oslo"},
    {"name": "Amir", "age": 25, "city": "Cairo"},
    {"name": "Bea", "age": 31, "city": "Berlin"},
    {"name": "Chen", "age": 19, "city": "Oslo"},
])]
by_age = sorted(people, key=operator.attrgetter("age", "name"))
get_city = operator.itemgetter("city")
cities = sorted({get_city({"city": p.city}) for p in people})
oldest = max(people, key=operator.attrgetter("age"))
upper = list(map(operator.methodcaller("upper"), (p.name for p in people)))
total_age = sum(p.age for p in people)
return {
    "by_age": [p.name for p in by_age],
    "cities": cities,
    "oldest": oldest.name,
    "upper": upper,
    "total_age": total_age,
}
