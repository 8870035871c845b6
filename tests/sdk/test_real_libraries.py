"""The hooks with the real libraries: PyTorch (two gloo ranks on CPU), Lightning and Hugging Face
`Trainer`. The project's venv has none of them (too heavy for the suite), so here these skip; they
run where the libraries are installed, e.g. a scratch venv with torch (CPU), lightning,
transformers, accelerate and pytest:

    <venv>/bin/python -m pytest --noconftest -p no:django tests/sdk/test_real_libraries.py
"""

import os
import signal
import socket
import subprocess
import sys

import pytest

from tessera_checkpoint import Checkpointer
from tests.hygiene.repo import ROOT
from tests.sdk.loopback_endpoint import Endpoint

torch = pytest.importorskip("torch", reason="PyTorch is not installed here")


def pod_env(tmp_path, endpoint, name):
    podinfo = tmp_path / f"podinfo-{name}"
    podinfo.mkdir(exist_ok=True)
    (tmp_path / "token").write_text("tok")
    return podinfo, {"TESSERA_PODINFO_DIR": str(podinfo), "TESSERA_CHECKPOINT_URL": endpoint.url,
                     "TESSERA_CHECKPOINT_TOKEN_FILE": str(tmp_path / "token")}


def two_ranks(tmp_path, endpoint, port, total, sigterm_at):
    ranks = []
    for rank in (0, 1):
        _podinfo, env = pod_env(tmp_path, endpoint, rank)
        env = {**os.environ, **env, "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "PYTHONPATH": f"{ROOT / 'sdk' / 'src'}:{ROOT}"}
        ranks.append(subprocess.Popen([sys.executable, str(ROOT / "tests" / "sdk" / "ddp_rank.py"),
                                       str(tmp_path / "ckpt"), str(total), str(sigterm_at)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [rank.communicate(timeout=180) for rank in ranks]
    for rank, (_out, err) in zip(ranks, outputs, strict=True):
        assert rank.returncode == 0, err[-2000:]
    return [out.split("\n") for out, _err in outputs]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_torch_ranks_agree_on_a_request_one_rank_saw_and_on_sigterm_to_one_rank(tmp_path):
    with Endpoint() as endpoint:
        (tmp_path / "podinfo-1").mkdir()
        (tmp_path / "podinfo-1" / "annotations").write_text('tessera.io/checkpoint-request="interval-3"\n')
        first = two_ranks(tmp_path, endpoint, free_port(), total=8, sigterm_at=5)
        assert [line for line in first[0] if line.startswith("saved")] == ["saved 1", "saved 5"]
        assert [line for line in first[1] if line.startswith("saved")] == ["saved 1", "saved 5"]
        assert [(b["checkpoint_id"], b["step"]) for b in endpoint.received] == [("periodic", 1), ("periodic", 5)]
        second = two_ranks(tmp_path, endpoint, free_port(), total=8, sigterm_at=0)
    assert second[0][0] == second[1][0] == "start 5"
    assert second[0][-2] == second[1][-2] and second[0][-2].startswith("done")  # ranks still in step


def test_lightning_callback_saves_on_sigterm_and_the_trainer_resumes_there(tmp_path):
    pl = pytest.importorskip("lightning.pytorch", reason="Lightning is not installed here")
    from tessera_checkpoint.lightning import TesseraCheckpoint

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return self.layer(batch).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class SigtermAt(pl.Callback):
        def on_train_batch_end(self, trainer, *args):
            if trainer.global_step == 7:
                os.kill(os.getpid(), signal.SIGTERM)

    def fit(callbacks, tessera):
        trainer = pl.Trainer(max_steps=20, accelerator="cpu", logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks)
        data = torch.utils.data.DataLoader(torch.randn(64, 4, generator=torch.Generator().manual_seed(0)),
                                           batch_size=2)
        try:
            trainer.fit(Tiny(), data, ckpt_path=tessera.resume_path())
        finally:
            tessera.ckpt.stop.uninstall()
        return trainer

    with Endpoint() as endpoint:
        _podinfo, env = pod_env(tmp_path, endpoint, "pl")
        os.environ.update(env)
        try:
            first = TesseraCheckpoint(dir=tmp_path / "ckpt", every_steps=5)
            with pytest.raises(SystemExit):  # Lightning's SIGTERMException, after the callback saved
                fit([SigtermAt(), first], first)
            assert first.resume_path().endswith("step-00000007.ckpt")
            second = TesseraCheckpoint(dir=tmp_path / "ckpt")
            resumed = fit([second], second)
        finally:
            for name in env:
                os.environ.pop(name)
    assert [(b["checkpoint_id"], b["step"]) for b in endpoint.received] == [("periodic", 5), ("periodic", 7)]
    assert resumed.global_step == 20


def test_hf_trainer_saves_on_sigterm_and_resumes_from_its_checkpoint(tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed here")
    from tessera_checkpoint.hf import TesseraCallback

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def forward(self, x, labels=None):
            return {"loss": (self.layer(x).squeeze(-1) - labels).pow(2).mean()}

    data = [{"x": torch.randn(4, generator=torch.Generator().manual_seed(i)), "labels": torch.tensor(1.0)}
            for i in range(64)]

    class SigtermAt(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 4:
                os.kill(os.getpid(), signal.SIGTERM)

    def train(callbacks, tessera):
        args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=10, save_strategy="no",
                                              per_device_train_batch_size=2, report_to=[], use_cpu=True,
                                              logging_strategy="no", disable_tqdm=True)
        trainer = transformers.Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=callbacks)
        try:
            trainer.train(resume_from_checkpoint=tessera.resume_path())
        finally:
            tessera.ckpt.stop.uninstall()
        return trainer

    with Endpoint() as endpoint:
        _podinfo, env = pod_env(tmp_path, endpoint, "hf")
        os.environ.update(env)
        try:
            first = TesseraCallback(dir=tmp_path / "ckpt")
            trainer = train([SigtermAt(), first], first)
            assert trainer.state.global_step == 4
            assert first.resume_path() == str(tmp_path / "out" / "checkpoint-4")
            second = TesseraCallback(dir=tmp_path / "ckpt")
            resumed = train([second], second)
        finally:
            for name in env:
                os.environ.pop(name)
    assert [(b["checkpoint_id"], b["step"]) for b in endpoint.received] == [("periodic", 4)]
    assert resumed.state.global_step == 10
    assert Checkpointer(tmp_path / "ckpt").latest.step == 4
