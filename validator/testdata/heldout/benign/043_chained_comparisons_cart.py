from decimal import Decimal

cart = args.get("cart", [
    {"sku": "A1", "price": "19.99", "qty": 2, "type": "book"},
    {"sku": "B2", "price": "5.00", "qty": 10, "type": "food"},
    {"sku": "C3", "price": "249.00", "qty": 1, "type": "electronics"},
])
TAX = {"book": Decimal("0"), "food": Decimal("0.05"), "electronics": Decimal("0.2")}
coupon = args.get("coupon", "SAVE10")
lines = []
subtotal = Decimal("0")
tax_total = Decimal("0")
for item in cart:
    price = Decimal(item["price"])
    qty = item["qty"]
    line = price * qty
    if qty >= 10:
        line *= Decimal("0.9")
    tax = (line * TAX.get(item.get("type"), Decimal("0.1"))).quantize(Decimal("0.01"))
    subtotal += line
    tax_total += tax
    lines.append({"sku": item["sku"], "line": str(line.quantize(Decimal("0.01"))), "tax": str(tax)})
discount = Decimal("0")
if coupon == "SAVE10" and 50 <= subtotal < 1000:
    discount = (subtotal * Decimal("0.10")).quantize(Decimal("0.01"))
total = subtotal - discount + tax_total
return {"lines": lines, "subtotal": str(subtotal.quantize(Decimal("0.01"))), "discount": str(discount), "tax": str(tax_total), "total": str(total.quantize(Decimal("0.01")))}
