from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from shop.models import Order
from shop.tasks import send_receipt
from tether.contrib.django import app as tether_app
from tether.contrib.django import enqueue, mode


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """The order row and its job commit together (or, on SQLite, the job follows the commit)."""
    with transaction.atomic():
        order = Order.objects.create(item=request.POST.get("item", "book"))
        job_id = enqueue(send_receipt, order.id)  # None on SQLite: enqueued after the commit
    return JsonResponse({"order": order.id, "job": job_id, "mode": mode(tether_app)})


class PaymentDeclined(Exception):
    pass


@csrf_exempt
@require_POST
def place_order_then_fail(request: HttpRequest) -> JsonResponse:
    """Raises after enqueueing: the order is rolled back, and so is its job."""
    with transaction.atomic():
        order = Order.objects.create(item=request.POST.get("item", "book"))
        enqueue(send_receipt, order.id)
        raise PaymentDeclined(f"order {order.id}")


def order(request: HttpRequest, order_id: int) -> JsonResponse:
    o = Order.objects.get(id=order_id)
    return JsonResponse({"order": o.id, "item": o.item, "receipt": o.receipt})
