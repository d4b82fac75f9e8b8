"""Every command's --help lists the valid models, disciplines, protocols and corpora, as their errors do."""

from __future__ import annotations

import re

import pytest

from labcore import data
from labcore.cli.main import main
from labcore.models import INITS, backbone_names
from labcore.pretrain.corpora import corpus_names
from labcore.protocols import PROTOCOLS


def help_of(capsys, *command: str) -> str:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    return re.sub(r"\s+", " ", re.sub(r"-\n\s+", "-", text))  # argparse wraps lines, even inside names


@pytest.mark.parametrize("command", ["run", "sweep", "submit", "tune"])
def test_spec_commands_list_models_inits_disciplines_and_protocols(capsys, command):
    text = help_of(capsys, command)
    for name in [*backbone_names(), "tiny:<family>", "run:<key>", *INITS.names(), *data.names(), "glue-<task>",
                 *PROTOCOLS.names()]:
        assert name in text, f"{command} --help does not name {name}"


def test_analyze_lists_models_and_disciplines_and_pretrain_every_corpus(capsys):
    text = help_of(capsys, "analyze")
    assert all(name in text for name in [*backbone_names(), "tiny:<family>", *data.names()])
    text = help_of(capsys, "pretrain")
    assert all(name in text for name in corpus_names()) and "..." not in text
