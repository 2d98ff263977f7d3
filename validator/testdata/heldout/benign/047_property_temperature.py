class Temperature:
    def __init__(self, celsius=0.0):
        self._c = float(celsius)

    @property
    def celsius(self):
        return self._c

    @celsius.setter
    def celsius(self, value):
        if value < -273.15:
            raise ValueError("below absolute zero")
        self._c = float(value)

    @property
    def fahrenheit(self):
        return self._c * 9 / 5 + 32

    @fahrenheit.setter
    def fahrenheit(self, value):
        self.celsius = (value - 32) * 5 / 9

    @property
    def kelvin(self):
        return self._c + 273.15

    @classmethod
    def from_kelvin(cls, k):
        return cls(k - 273.15)

    def __repr__(self):
        return f"{type(self).__name__}({self._c:.2f}C)"

    def __lt__(self, other):
        return self._c < other._c

    def __eq__(self, other):
        return isinstance(other, Temperature) and abs(self._c - other._c) < 1e-9


readings = [Temperature(c) for c in args.get("celsius", [21.5, -5, 100, 37])]
t = Temperature()
t.fahrenheit = 212
errs = []
try:
    t2 = Temperature()
    t2.celsius = -300
except ValueError as e:
    errs.append(f"{type(e).__name__}: {e}")
return {
    "sorted": [repr(r) for r in sorted(readings)],
    "f": [round(r.fahrenheit, 2) for r in readings],
    "boil": repr(t),
    "eq": t == Temperature.from_kelvin(373.15),
    "errors": errs,
}
