"""The one runner behind every tool's main(): the order of refusals, their stream and exit
code, and what reaches the body."""
from __future__ import annotations

import argparse

import pytest

from pybroker.tools import consumer_perf_test, dump_log, producer_perf_test
from pybroker.tools.common import ArgumentParser, ToolError, UsageError, require, tool_main


def _parser() -> ArgumentParser:
    p = ArgumentParser("kafka-demo", "demo")
    p.add_argument("--bootstrap-server")
    p.add_argument("--broker-list")
    p.add_argument("--count", type=int)
    p.add_argument("--describe", action="store_true")
    p.add_argument("--fail")
    return p


def _never(*_: object) -> int:
    raise AssertionError("the body must not run")


def test_first_missing_flag_is_named_and_alternatives_satisfy_it(capsys):
    code = tool_main(_parser(), ["--count", "1"], _never,
                     required=(("bootstrap_server", "broker_list"), "count"))
    assert code == 1
    assert capsys.readouterr() == ("", 'Missing required argument "[bootstrap-server]"\n')
    code = tool_main(_parser(), ["--broker-list", "h:1"], _never,
                     required=(("bootstrap_server", "broker_list"), "count", "describe"))
    assert capsys.readouterr().err == 'Missing required argument "[count]"\n'
    assert code == 1


def test_empty_and_false_are_missing_but_zero_is_given():
    with pytest.raises(UsageError, match=r"\[bootstrap-server\]"):
        require(argparse.Namespace(bootstrap_server=""), "bootstrap_server")
    with pytest.raises(UsageError, match=r"\[describe\]"):
        require(argparse.Namespace(describe=False), "describe")
    require(argparse.Namespace(count=0, files=["a"]), "count", "files")


def test_check_runs_after_required_and_reports_bare_with_its_exit_code(capsys):
    def check(args: argparse.Namespace) -> None:
        raise ToolError(f"bad {args.fail}", exit_code=3)

    assert tool_main(_parser(), ["--fail", "x"], _never, required=("count",),
                     check=check) == 1
    assert capsys.readouterr().err == 'Missing required argument "[count]"\n'
    assert tool_main(_parser(), ["--fail", "x"], _never, check=check,
                     error_prefix="Oops: ") == 3
    assert capsys.readouterr().err == "bad x\n"


def test_what_check_chooses_reaches_the_async_body_and_body_errors_get_the_prefix(capsys):
    seen = []

    async def body(args: argparse.Namespace, action: str) -> int:
        seen.append((args.count, action))
        raise ToolError("it broke")

    assert tool_main(_parser(), ["--count", "0"], body, required=("count",),
                     check=lambda args: "describe", error_prefix="Oops: ") == 1
    assert seen == [(0, "describe")]
    assert capsys.readouterr().err == "Oops: it broke\n"


def test_plain_body_is_called_directly_and_usage_errors_exit_before_it(capsys):
    assert tool_main(_parser(), ["--count", "7"], lambda args: args.count) == 7
    assert tool_main(_parser(), ["--nope"], _never) == 1
    assert "unrecognized arguments: --nope" in capsys.readouterr().err


def test_tools_keep_their_own_notion_of_missing(capsys):
    # dump-log: a --files naming nothing is missing; producer-perf: --topic '' is given.
    assert dump_log.main(["--files", ","]) == 1
    assert capsys.readouterr().err == 'Missing required argument "[files]"\n'
    producer_perf_test.check_args(argparse.Namespace(topic="", num_records=0, throughput=-1))
    with pytest.raises(UsageError, match=r"\[topic\]"):
        producer_perf_test.check_args(argparse.Namespace(topic=None, num_records=1,
                                                         throughput=1))
    # consumer-perf: --messages first, then exactly one of topic/include, then the bootstrap.
    assert consumer_perf_test.main(["--messages", "0", "--bootstrap-server", "h:1"]) == 1
    assert capsys.readouterr().err == ("Exactly one of the following arguments is required: "
                                       "[topic], [include]\n")
    assert consumer_perf_test.main(["--messages", "0", "--topic", "t"]) == 1
    assert capsys.readouterr().err == 'Missing required argument "[bootstrap-server]"\n'
