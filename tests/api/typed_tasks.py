"""Typed tasks for the codec tests; process-pool children import ``tests.api.typed_tasks:app``,
which registers the same tasks under the same names."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from pydantic import BaseModel

import tether


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int
    label: str | None = None


@dataclasses.dataclass(frozen=True)
class Invoice:
    id: UUID
    due: date
    amount: Decimal
    issued: datetime
    lines: list[Point]
    colour: Colour = Colour.RED
    tags: frozenset[str] = frozenset()


class Customer(BaseModel):
    name: str
    since: datetime
    balance: Decimal


@dataclasses.dataclass(frozen=True)
class Receipt:
    invoice: Invoice
    customer: Customer
    total: Decimal
    paid_at: datetime
    took: timedelta


def register(app: tether.App) -> None:
    @app.task(name="typed.settle", max_attempts=1)
    def settle(invoice: Invoice, customer: Customer, *extra: Decimal,
               when: datetime, **notes: date) -> Receipt:
        kinds = (type(invoice), type(invoice.id), type(invoice.due), type(invoice.amount),
                 type(invoice.issued), type(invoice.lines[0]), type(invoice.colour),
                 type(invoice.tags), type(customer), type(customer.since), type(when))
        assert kinds == (Invoice, UUID, date, Decimal, datetime, Point, Colour, frozenset,
                         Customer, datetime, datetime), kinds
        assert all(type(e) is Decimal for e in extra) and all(
            type(d) is date for d in notes.values()), (extra, notes)
        assert when.tzinfo is not None
        return Receipt(invoice, customer, invoice.amount + sum(extra, Decimal(0)),
                       when + timedelta(days=1), timedelta(seconds=1.5))

    @app.task(name="typed.shift", max_attempts=1)
    async def shift(at: datetime, by: timedelta) -> datetime:
        await asyncio.sleep(0)
        assert type(at) is datetime and type(by) is timedelta
        return at + by

    @app.task(name="typed.plain", max_attempts=1)
    def plain(value, other=None):  # type: ignore[no-untyped-def]  # unannotated: plain JSON
        return {"value": value, "other": other, "kind": type(value).__name__}

    @app.task(name="typed.when", max_attempts=1)
    def when(at: datetime) -> str:
        return at.isoformat()


def sample() -> tuple[Invoice, Customer]:
    issued = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)
    invoice = Invoice(UUID("12345678-1234-5678-1234-567812345678"), date(2026, 12, 1),
                      Decimal("10.10"), issued, [Point(1, 2), Point(3, 4, "far")],
                      Colour.BLUE, frozenset({"a"}))
    return invoice, Customer(name="Ada", since=issued, balance=Decimal("0.30"))


def expected_receipt(extra: Any = (Decimal("0.01"),)) -> Receipt:
    invoice, customer = sample()
    when = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
    return Receipt(invoice, customer, invoice.amount + sum(extra, Decimal(0)),
                   when + timedelta(days=1), timedelta(seconds=1.5))


app = tether.App()
register(app)
