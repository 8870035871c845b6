from django.contrib import admin

from whatif.models import WhatIfRun


@admin.register(WhatIfRun)
class WhatIfRunAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "created_by", "state", "progress", "hours", "baseline_policy", "policy")
    list_filter = ("state",)
    readonly_fields = [f.name for f in WhatIfRun._meta.fields]
