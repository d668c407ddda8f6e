from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@staff_member_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/overview.html", {})
