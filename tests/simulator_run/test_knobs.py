"""Every realism knob is a `simulate run` option, checked like any other input."""

from __future__ import annotations

import argparse
from dataclasses import fields

import pytest

from scheduling.simulator.run.knobs import DEFAULT_KNOBS, Knobs, add_knob_arguments, knobs_from_args


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_knob_arguments(parser)
    return knobs_from_args(parser.parse_args(argv))


def test_every_knob_has_an_option_and_a_default():
    assert _parse([]) == DEFAULT_KNOBS
    for f in fields(Knobs):
        knobs = _parse(["--" + f.name.replace("_", "-"), "123.5"])
        assert getattr(knobs, f.name) == 123.5


@pytest.mark.parametrize("bad", ["-1", "soon", "nan", "inf"])
def test_a_bad_knob_is_refused(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        _parse(["--restart-s", bad])
    assert exc.value.code == 2 and "--restart-s" in capsys.readouterr().err
