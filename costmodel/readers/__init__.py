"""Readers of every measurement format the project reads: the built-in profile build
(``python -m costmodel.fit.builtin``), ``costmodel calibrate fit`` and ``costmodel compare``.

Each reader returns plain rows in SI-or-as-printed units documented in its docstring and names the
file and line of anything it cannot parse.  One registry (:mod:`.registry`) lists every format: the
ones cluster operators already have (nccl-tests stdout, ``nvidia-smi --query-gpu`` CSV, ``nvidia-smi
dmon``, ``dcgmi dmon``, Zeus CSV) and the suite's own JSONL (:mod:`.suite_jsonl`) are recognised by
content (:func:`detect_format`, :func:`read_measurement`); monitor traces are normalised to one
:class:`PowerTrace` (W, C, MHz, %, Unix seconds).  Training logs (Megatron-LM, NeMo, torchtitan,
Megatron-DeepSpeed) are read by :mod:`.training_logs`.
"""
from .dcgm import DCGM_FIELDS, DcgmField, DcgmParseError, DcgmTable, read_dcgmi_dmon
from .flagperf import (BaseBenchmark, FlagPerfParseError, OperatorRow, flagperf_quantity, read_flagperf_base_md,
                       read_flagperf_operator_csv)
from .markdown import (MdTable, markdown_tables, parse_quantity, read_allreduce_bench, read_azure_results,
                       read_mamf, read_mlengineering_nvls)
from .nccl_tests import (NcclRow, NcclTable, NcclTestsParseError, collective_from_name, read_massaged_nccl_table,
                         read_nccl_tests)
from .nvidia_smi import (DmonTable, NvidiaSmiDmonParseError, NvidiaSmiParseError, SmiTrace, read_nvidia_smi_csv,
                         read_nvidia_smi_dmon)
from .power_trace import (PowerTrace, power_trace_from_dcgmi, power_trace_from_dmon, power_trace_from_nvidia_smi_csv,
                          power_trace_from_suite)
from .registry import (FORMATS, REGISTRY, FitInput, Format, Measurement, NoUsableDataError, detect_format,
                       read_measurement, read_power_trace)
from .suite_jsonl import SuiteRun, make_record, read_suite_jsonl
from .training_logs import TrainingLog, read_training_log
from .vllm_bench import read_vllm_gemm_bench
from .xla import read_xla_collective_table, read_xla_matmul_table
from .perseus import PerseusRow, read_perseus_stage_profile
from .zeus import ZeusParseError, ZeusRow, ZeusTable, read_zeus_csv

__all__ = ["MdTable", "markdown_tables", "parse_quantity", "read_allreduce_bench", "read_azure_results",
           "read_mamf", "read_mlengineering_nvls", "NcclRow", "NcclTable", "NcclTestsParseError",
           "read_massaged_nccl_table", "read_nccl_tests", "read_xla_collective_table",
           "read_xla_matmul_table", "read_vllm_gemm_bench", "NvidiaSmiParseError", "SmiTrace", "read_nvidia_smi_csv", "ZeusParseError",
           "ZeusRow", "ZeusTable", "read_zeus_csv", "PerseusRow", "read_perseus_stage_profile", "BaseBenchmark", "FlagPerfParseError", "OperatorRow",
           "flagperf_quantity", "read_flagperf_base_md", "read_flagperf_operator_csv", "collective_from_name",
           "DmonTable", "NvidiaSmiDmonParseError", "read_nvidia_smi_dmon", "DCGM_FIELDS", "DcgmField", "DcgmParseError",
           "DcgmTable", "read_dcgmi_dmon", "PowerTrace", "power_trace_from_nvidia_smi_csv", "power_trace_from_dmon",
           "power_trace_from_dcgmi", "power_trace_from_suite", "FORMATS", "Measurement", "NoUsableDataError",
           "detect_format", "read_measurement", "REGISTRY", "FitInput", "Format", "read_power_trace", "SuiteRun",
           "make_record", "read_suite_jsonl", "TrainingLog", "read_training_log"]
