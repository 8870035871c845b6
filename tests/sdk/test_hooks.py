"""The framework hooks. torch, lightning and transformers are not installed in this suite (too
heavy for it), so each hook is driven through a tiny stand-in of its library's base class put in
sys.modules; what is checked is the hook's own logic and the calls it makes on the Trainer. The
same hooks with the real libraries: test_real_libraries.py (skipped where they are not installed)."""

import importlib
import signal
import sys
import types

import pytest

from tessera_checkpoint import Checkpointer


def fresh(module: str):
    sys.modules.pop(module, None)
    return importlib.import_module(module)


@pytest.mark.parametrize("hook, library", [("tessera_checkpoint.torch", "torch"),
                                           ("tessera_checkpoint.lightning", "lightning"),
                                           ("tessera_checkpoint.hf", "transformers")])
def test_a_hook_without_its_library_says_what_to_install(monkeypatch, hook, library):
    for missing in ("torch", "lightning.pytorch", "pytorch_lightning", "transformers"):
        monkeypatch.setitem(sys.modules, missing, None)  # None in sys.modules: import fails
    monkeypatch.delitem(sys.modules, hook, raising=False)
    with pytest.raises(ImportError, match=f"{hook} needs .*pip install {library}"):
        importlib.import_module(hook)


@pytest.fixture
def ckpt(tmp_path):
    return Checkpointer(tmp_path / "ckpt", exit_on_stop=False)


@pytest.fixture
def hf(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(TrainerCallback=object))
    monkeypatch.delitem(sys.modules, "tessera_checkpoint.hf", raising=False)
    yield fresh("tessera_checkpoint.hf")
    sys.modules.pop("tessera_checkpoint.hf", None)


def test_the_hf_callback_asks_the_trainer_to_save_and_confirms_what_it_saved(hf, ckpt, tmp_path):
    callback = hf.TesseraCallback(tmp_path / "ckpt", checkpointer=ckpt)
    args = types.SimpleNamespace(output_dir=str(tmp_path / "out"))
    control = types.SimpleNamespace(should_save=False, should_training_stop=False)
    state = types.SimpleNamespace(global_step=7)
    callback.on_step_end(args, state, control)
    assert not control.should_save
    ckpt.stop._handle(signal.SIGTERM, None)
    state.global_step = 8
    callback.on_step_end(args, state, control)
    assert control.should_save and control.should_training_stop
    (tmp_path / "out" / "checkpoint-8").mkdir(parents=True)  # what the Trainer writes
    callback.on_save(args, state, control)
    assert callback.resume_path() == str(tmp_path / "out" / "checkpoint-8")
    assert Checkpointer(tmp_path / "ckpt").resume() == 8


class StandInTrainer:
    """The parts of lightning's Trainer the callback uses."""

    def __init__(self, folder):
        self.global_step, self.world_size, self.is_global_zero = 0, 1, True
        self.should_stop, self.saved = False, []

    def save_checkpoint(self, path):
        open(path, "w").close()
        self.saved.append(path)


@pytest.fixture
def lightning(monkeypatch):
    stand_in = types.ModuleType("lightning.pytorch")
    stand_in.Callback = type("Callback", (), {})
    monkeypatch.setitem(sys.modules, "lightning.pytorch", stand_in)
    yield fresh("tessera_checkpoint.lightning")
    sys.modules.pop("tessera_checkpoint.lightning", None)


def test_the_lightning_callback_saves_through_the_trainer_and_stops_it(lightning, tmp_path):
    callback = lightning.TesseraCheckpoint(checkpointer=Checkpointer(tmp_path / "ckpt", every_steps=5,
                                                                     exit_on_stop=False))
    trainer = StandInTrainer(tmp_path)
    callback.setup(trainer, None, "fit")
    for step in range(1, 8):
        trainer.global_step = step
        callback.on_train_batch_end(trainer, None, None, None, step - 1)
    assert trainer.saved == [str(tmp_path / "ckpt" / "step-00000005.ckpt")] and not trainer.should_stop
    callback.ckpt.stop._handle(signal.SIGTERM, None)
    callback.on_train_batch_end(trainer, None, None, None, 7)
    assert trainer.saved[-1].endswith("step-00000007.ckpt") and trainer.should_stop
    assert callback.resume_path() == trainer.saved[-1]


def test_a_sigterm_after_the_batch_end_is_saved_when_lightning_raises(lightning, tmp_path):
    callback = lightning.TesseraCheckpoint(checkpointer=Checkpointer(tmp_path / "ckpt", exit_on_stop=False))
    trainer = StandInTrainer(tmp_path)
    trainer.global_step = 3
    callback.on_exception(trainer, None, RuntimeError("not a SIGTERM"))
    assert trainer.saved == []
    callback.ckpt.stop._handle(signal.SIGTERM, None)
    callback.on_exception(trainer, None, SystemExit())
    assert trainer.saved == [str(tmp_path / "ckpt" / "step-00000003.ckpt")]


def test_the_lightning_callback_needs_a_folder(lightning):
    with pytest.raises(ValueError, match="checkpoint folder"):
        lightning.TesseraCheckpoint()

