import tether
from shop.models import Order
from tether.contrib.django import app, atomic_job


@app.task(max_attempts=3)
def send_receipt(order_id: int) -> str:
    """Runs in the worker (``manage.py tether_worker``), after the order committed.

    On PostgreSQL ``atomic_job()`` commits the receipt and the job's completion together:
    if this attempt lost its lease, both roll back, so the receipt is written exactly once.
    On the other stores it is a plain ``transaction.atomic()`` (at least once).
    """
    with atomic_job():
        order = Order.objects.select_for_update().get(id=order_id)
        order.receipt = f"receipt for {order.item} (job {tether.current_job().id})"
        order.save(update_fields=["receipt"])
    return order.receipt
