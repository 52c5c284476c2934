"""A transformer's attention forms, declared once: every option, network field, layer param
and profile that names one takes it from here."""
from __future__ import annotations

__all__ = ["NAIVE", "ATTENTION_FORMS", "FUSED_FORMS", "TENSOR_LAYOUTS"]

#: separate scores, softmax and context layers (each a tensor of its own)
NAIVE = "naive"
#: every form the workload's ``attention`` and a network's ``attention`` field take: naive, FlashAttention-2
#: and -3, or ``fused`` (the best fused kernel the GPU runs)
ATTENTION_FORMS: tuple[str, ...] = (NAIVE, "flash2", "flash3", "fused")
#: the forms that run attention as one fused kernel (a ``flash_attention`` layer's ``kernel``)
FUSED_FORMS: tuple[str, ...] = tuple(form for form in ATTENTION_FORMS if form != NAIVE)
#: the tensor layouts of the forms (what a density profile names): naive's separate tensors,
#: or one fused ``attn`` tensor (every fused form's)
TENSOR_LAYOUTS: tuple[str, ...] = (NAIVE, "fused")
