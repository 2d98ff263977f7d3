class Node:
    __slots__ = ("value", "next")

    def __init__(self, value, next=None):
        self.value = value
        self.next = next


class LinkedList:
    """A singly linked list. LinkedList.__iter__ yields values."""

    def __init__(self, iterable=()):
        self.head = None
        self._len = 0
        for v in reversed(list(iterable)):
            self.push(v)

    def push(self, v):
        self.head = Node(v, self.head)
        self._len += 1

    def __iter__(self):
        node = self.head
        while node:
            yield node.value
            node = node.next

    def __len__(self):
        return self._len

    def __getitem__(self, i):
        if i < 0:
            i += len(self)
        for idx, v in enumerate(self):
            if idx == i:
                return v
        raise IndexError(i)

    def __repr__(self):
        return "LinkedList([" + ", ".join(map(repr, self)) + "])"

    def __eq__(self, other):
        return isinstance(other, LinkedList) and list(self) == list(other)

    def reverse(self):
        prev, cur = None, self.head
        while cur:
            cur.next, prev, cur = prev, cur, cur.next
        self.head = prev
        return self


ll = LinkedList(args.get("values", [1, 2, 3, 4, 5]))
same = ll == LinkedList([1, 2, 3, 4, 5])
return {"repr": repr(ll), "len": len(ll), "last": ll[-1], "same": same, "reversed": list(ll.reverse())}
