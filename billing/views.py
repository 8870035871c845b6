from django.contrib.auth.decorators import login_required
from django.http import HttpResponse


@login_required
def chargeback(request):
    return HttpResponse("Chargeback reports arrive with the billing issue.")
