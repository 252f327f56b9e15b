from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    receipt = models.TextField(blank=True, default="")  # written by the send_receipt task
    created = models.DateTimeField(auto_now_add=True)
