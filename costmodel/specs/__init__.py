"""Specs: the model, the GPU, the cluster, the fitted profile and the training recipe.

Everything the cost model reads from disk passes through here once and comes out as frozen
dataclasses in SI units.  Bad input raises :class:`costmodel.errors.InputError` naming the file and
field.  Formats: Hugging Face ``config.json`` (or YAML with the same keys) for models;
hardware/README.md for GPU, cluster and profile YAML.  One module per concept:

* :mod:`.model`     ModelSpec, load_model, list_models
* :mod:`.hardware`  GpuSpec, ClusterSpec, load_gpu, load_cluster, list_gpus, list_clusters
* :mod:`.cooling`   CoolingSpec: a node's slots, their air or coolant path, the inlet temperature
* :mod:`.recipe`    Recipe, PRECISIONS
* :mod:`.params`    the fitted parameter sets: GemmParams, CollectiveParams, PowerParams, ThermalParams
* :mod:`.profile`   Profile, load_profile (the profile schema)
* :mod:`.loading`   catalog folders and typed field access shared by the readers
"""
from .hardware import (ClusterSpec, CoolingSpec, FabricTier, GpuSpec, list_clusters, list_gpus, load_cluster, load_gpu,
                       with_fabric)
from .loading import catalog_dir, hardware_dir
from .model import ModelSpec, list_models, load_model
from .params import (COLLECTIVES, PROTOCOLS, AttentionKernelParams, CollectiveParams, GemmParams, GroupFit, PowerParams,
                     ThermalParams)
from .profile import Profile, cluster_profile, has_builtin_profile, load_profile
from .recipe import (ATTENTION_KERNELS, CROSS_ENTROPIES, MEGATRON_CROSS_ENTROPIES, megatron_cross_entropy, MOE_DISPATCHER_ALIASES, MOE_DISPATCHERS, OPTIMIZERS, PRECISIONS,
                     RECOMPUTE_MODULES, STATE_DTYPES, CrossEntropySpec, OptimizerSpec, Recipe, megatron_capacity_factor,
                     recompute_module_list, recompute_modules_problem)

__all__ = ["ClusterSpec", "CoolingSpec", "FabricTier", "GpuSpec", "with_fabric", "list_clusters", "list_gpus", "load_cluster", "load_gpu",
           "catalog_dir", "hardware_dir", "ModelSpec", "list_models", "load_model", "COLLECTIVES", "PROTOCOLS",
           "CollectiveParams", "GemmParams", "GroupFit", "PowerParams", "ThermalParams", "Profile", "cluster_profile", "has_builtin_profile", "load_profile",
           "OPTIMIZERS", "OptimizerSpec", "PRECISIONS", "Recipe", "CROSS_ENTROPIES", "MEGATRON_CROSS_ENTROPIES", "megatron_cross_entropy", "CrossEntropySpec", "ATTENTION_KERNELS", "AttentionKernelParams",
           "MOE_DISPATCHERS", "MOE_DISPATCHER_ALIASES", "megatron_capacity_factor", "RECOMPUTE_MODULES", "recompute_module_list",
           "recompute_modules_problem", "STATE_DTYPES"]
