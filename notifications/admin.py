from django.contrib import admin

from notifications.models import Delivery, Notice, Preference, TeamWebhook, url_shown


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows only the system writes: listed and searchable, never edited here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Preference)
class PreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "email", "events"]
    search_fields = ["user__username"]
    raw_id_fields = ["user"]


@admin.register(TeamWebhook)
class TeamWebhookAdmin(admin.ModelAdmin):
    list_display = ["team", "name", "where", "events", "created_by", "created_at"]
    search_fields = ["team__name", "name"]
    raw_id_fields = ["created_by"]

    @admin.display(description="URL")
    def where(self, hook: TeamWebhook) -> str:
        return url_shown(hook.url)  # its path is the receiver's secret


class DeliveryInline(admin.TabularInline):
    model = Delivery
    fields = ["channel", "target_shown", "status", "attempts", "last_error", "sent_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Notice)
class NoticeAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "event", "subject", "team", "fanned_out_at"]
    list_filter = ["event"]
    search_fields = ["subject", "key"]
    raw_id_fields = ["team", "job", "users"]
    inlines = [DeliveryInline]


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    """Failed deliveries are the ones to look at: `last_error` says why."""

    list_display = ["created_at", "notice", "channel", "target_shown", "status", "attempts", "last_error"]
    list_filter = ["status", "channel"]
    search_fields = ["notice__subject", "user__username", "webhook__name"]
    list_select_related = ["notice"]
    raw_id_fields = ["notice", "user", "webhook"]
