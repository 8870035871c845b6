"""The submit form: field types and ranges here, the rules that need the cluster in services."""

from django import forms
from django.core.validators import MaxValueValidator

from scheduling import sizing
from scheduling.models import Job
from scheduling.services import MAX_JOB_SECONDS


class JobSubmitForm(forms.Form):
    team = forms.ChoiceField()
    project = forms.ChoiceField(required=False)
    name = forms.SlugField(max_length=100, help_text="Letters, digits, '-' and '_'.")
    kind = forms.ChoiceField(choices=Job.Kind.choices)
    priority_class = forms.ChoiceField(label="Priority",
                                       help_text="Starts at the lowest; a higher class may preempt lower ones.")
    gpus = forms.IntegerField(min_value=0, max_value=4096, initial=0, label="Whole GPUs",
                              help_text="0 for a sub-GPU job sized by its memory need.")
    gpu_memory_gb = forms.FloatField(min_value=0, initial=0, label="Memory need per GPU (GiB)")
    mig_profile = forms.CharField(required=False, max_length=30, label="Or a MIG profile",
                                  help_text="e.g. 1g.10gb; overrides the memory need.")
    gpu_models = forms.MultipleChoiceField(required=False, label="GPU models",
                                           help_text="Run only on these; none chosen: any.")
    gang = forms.BooleanField(required=False, initial=True, help_text="All GPUs at once or none.")
    accepts_no_isolation = forms.BooleanField(
        required=False, label="May share a time-sliced GPU",
        help_text="A sub-GPU job may run where GPUs are time-sliced: no memory limit keeps neighbours apart.")
    cpu_cores = forms.FloatField(min_value=0.1, initial=4, label="CPU cores")
    memory_gb = forms.FloatField(min_value=0, initial=32, label="Host memory (GiB)")
    checkpoint_interval_s = forms.IntegerField(required=False, min_value=0, max_value=MAX_JOB_SECONDS,
                                               label="Checkpoint interval (s)")
    checkpoint_save_s = forms.IntegerField(required=False, min_value=1, max_value=3600,
                                           label="Checkpoint save time (s)",
                                           help_text="How long a save takes: the pods' grace on SIGTERM.")
    expected_runtime_s = forms.IntegerField(required=False, min_value=1, max_value=MAX_JOB_SECONDS,
                                            label="Expected runtime (s)")
    image = forms.CharField(required=False, max_length=300, label="Container image")
    command = forms.CharField(required=False, max_length=1000, widget=forms.Textarea(attrs={"rows": 2}))
    # Names only: each is looked up in the team's own namespace.
    volume_claim = forms.CharField(required=False, max_length=253, label="Volume claim",
                                   help_text="A PersistentVolumeClaim of the team's, mounted in every pod.")
    volume_mount_path = forms.CharField(required=False, max_length=200, initial="/checkpoints",
                                        label="Mounted at")
    env_secret = forms.CharField(required=False, max_length=253, label="Secret as environment",
                                 help_text="Its keys become environment variables.")
    file_secret = forms.CharField(required=False, max_length=253, label="Secret as files",
                                  help_text="Mounted read-only at /etc/secrets/<name>.")

    def __init__(self, *args, teams, projects, priority_classes, gpu_models, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [(t.name, t.name) for t in teams]
        self.fields["project"].choices = [("", "(first project)")] + [(p, p) for p in projects]
        self.fields["priority_class"].choices = [(c.name, f"{c.name} ({c.value})") for c in priority_classes]
        # Every kind may use every class the team allows, so the default is the lowest of them:
        # a higher class (production never yields) is a choice a person makes, not a default.
        if priority_classes:
            self.fields["priority_class"].initial = min(priority_classes, key=lambda c: c.value).name
        self.fields["gpu_models"].choices = [(m, m) for m in gpu_models]


class PriorityForm(forms.Form):
    """A lead's change of a job's priority class (the class itself is checked by the service)."""

    priority_class = forms.CharField(max_length=40)


class SizingForm(forms.Form):
    """The model-size helper's inputs (also read by the sizing API endpoint)."""

    params_billion = forms.FloatField(min_value=0.001, max_value=10000, label="Parameters (billions)")
    precision = forms.ChoiceField(choices=[(p, p) for p in sizing.PRECISIONS], initial="bf16")
    workload = forms.ChoiceField(choices=list(sizing.WORKLOADS.items()), initial="inference")
    kv_cache_gb = forms.FloatField(min_value=0, required=False, initial=0, label="KV cache (GiB)")
    activations_gb = forms.FloatField(min_value=0, required=False, initial=0, label="Activations (GiB)")


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="Where it is used, e.g. 'laptop' or 'ci'.")
    days = forms.IntegerField(min_value=1, initial=30, label="Valid for (days)")

    def __init__(self, *args, max_days: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["days"].max_value = max_days
        self.fields["days"].validators.append(MaxValueValidator(max_days))
        self.fields["days"].widget.attrs["max"] = max_days
