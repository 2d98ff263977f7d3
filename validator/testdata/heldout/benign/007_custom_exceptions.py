class ValidationError(Exception):
    """Raised when a record fails validation. See ValidationError.__init__."""

    def __init__(self, field, message):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class MissingField(ValidationError):
    def __init__(self, field):
        super().__init__(field, "is required")


def validate(record):
    for key in ("id", "email", "age"):
        if key not in record:
            raise MissingField(key)
    if "@" not in str(record["email"]):
        raise ValidationError("email", "must contain @")
    if not isinstance(record["age"], int) or record["age"] < 0:
        raise ValidationError("age", "must be a non-negative int")
    return True


records = args.get("records", [
    {"id": 1, "email": "a@b.c", "age": 30},
    {"id": 2, "email": "nope", "age": 3},
    {"id": 3, "age": 9},
    {"id": 4, "email": "x@y.z", "age": -1},
])
report = []
for rec in records:
    try:
        validate(rec)
        report.append({"id": rec.get("id"), "ok": True})
    except ValidationError as e:
        report.append({
            "id": rec.get("id"),
            "ok": False,
            "error": type(e).__name__,
            "field": e.field,
            "detail": str(e),
        })
    finally:
        pass
return report
