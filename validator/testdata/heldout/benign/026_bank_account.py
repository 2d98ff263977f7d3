from decimal import Decimal, ROUND_HALF_UP


class InsufficientFunds(Exception):
    def __init__(self, balance, amount):
        super().__init__(f"cannot withdraw {amount}; balance is {balance}")
        self.balance = balance
        self.amount = amount


class Account:
    _next_id = 1

    def __init__(self, owner, balance="0"):
        self.id = Account._next_id
        Account._next_id += 1
        self.owner = owner
        self._balance = Decimal(balance)
        self.history = []

    @property
    def balance(self):
        return self._balance.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)

    def deposit(self, amount):
        amount = Decimal(str(amount))
        if amount <= 0:
            raise ValueError("deposit must be positive")
        self._balance += amount
        self.history.append(("deposit", str(amount)))

    def withdraw(self, amount):
        amount = Decimal(str(amount))
        if amount > self._balance:
            raise InsufficientFunds(self.balance, amount)
        self._balance -= amount
        self.history.append(("withdraw", str(amount)))

    def __repr__(self):
        return f"Account(id={self.id}, owner={self.owner!r}, balance={self.balance})"


acct = Account(args.get("owner", "sam"), args.get("opening", "100.00"))
log = []
for op, amt in args.get("ops", [["deposit", 25.5], ["withdraw", 10.333], ["withdraw", 500], ["deposit", -1]]):
    try:
        getattr(acct, op)(amt)
        log.append(f"{op} {amt}: ok")
    except (InsufficientFunds, ValueError) as e:
        log.append(f"{op} {amt}: {type(e).__name__}: {e}")
return {"account": repr(acct), "balance": str(acct.balance), "log": log, "history": acct.history}
