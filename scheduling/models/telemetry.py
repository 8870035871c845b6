"""What the node agents and dcgm-exporter measured, per GPU and per MIG instance."""

from __future__ import annotations

from django.db import models

from .cluster import Gpu, MigInstance


class GpuSample(models.Model):
    """A measured utilisation sample from a node agent, for the utilisation charts."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    utilization = models.FloatField()
    memory_used_gb = models.FloatField()

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["gpu", "at"])]
        constraints = [models.UniqueConstraint(fields=["gpu", "at"], name="gpu_sample_unique_time")]

    def __str__(self) -> str:
        return f"{self.gpu_id} @ {self.at:%Y-%m-%d %H:%M}: {self.utilization:.0%}"


class MigSample(models.Model):
    """One reading of one MIG instance, for a MIG job's charts. utilization is null where the
    source cannot measure a slice (NVML in MIG mode): not measured, which is not idle."""

    mig_instance = models.ForeignKey(MigInstance, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    utilization = models.FloatField(null=True, blank=True)
    memory_used_gb = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]
        verbose_name = "MIG instance sample"
        indexes = [models.Index(fields=["mig_instance", "at"])]
        constraints = [models.UniqueConstraint(fields=["mig_instance", "at"], name="mig_sample_unique_time")]

    def __str__(self) -> str:
        return f"{self.mig_instance_id} @ {self.at:%Y-%m-%d %H:%M}"
