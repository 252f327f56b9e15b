from django.urls import path
from shop import views

urlpatterns = [
    path("orders/", views.place_order),
    path("orders/failing/", views.place_order_then_fail),
    path("orders/<int:order_id>/", views.order),
]
