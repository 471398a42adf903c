"""Readers of the public measurement formats used by ``calibration.fit_public``.

Each reader returns plain rows in SI-or-as-printed units documented in its docstring and names the
file and line of anything it cannot parse.
"""
from .flagperf import (BaseBenchmark, FlagPerfParseError, OperatorRow, flagperf_quantity, read_flagperf_base_md,
                       read_flagperf_operator_csv)
from .markdown import (MdTable, markdown_tables, parse_quantity, read_allreduce_bench, read_azure_results,
                       read_mamf, read_mlengineering_nvls)
from .nccl_tests import NcclRow, NcclTable, NcclTestsParseError, read_massaged_nccl_table, read_nccl_tests
from .nvidia_smi import NvidiaSmiParseError, SmiTrace, read_nvidia_smi_csv
from .xla import read_xla_collective_table, read_xla_matmul_table
from .zeus import ZeusParseError, ZeusRow, ZeusTable, read_zeus_csv

__all__ = ["MdTable", "markdown_tables", "parse_quantity", "read_allreduce_bench", "read_azure_results",
           "read_mamf", "read_mlengineering_nvls", "NcclRow", "NcclTable", "NcclTestsParseError",
           "read_massaged_nccl_table", "read_nccl_tests", "read_xla_collective_table",
           "read_xla_matmul_table", "NvidiaSmiParseError", "SmiTrace", "read_nvidia_smi_csv", "ZeusParseError",
           "ZeusRow", "ZeusTable", "read_zeus_csv", "BaseBenchmark", "FlagPerfParseError", "OperatorRow",
           "flagperf_quantity", "read_flagperf_base_md", "read_flagperf_operator_csv"]
