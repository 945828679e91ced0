"""What is measured on a model: regional ``metrics`` (every formula once; the density, positions
and E_inf themselves are ``lostmid.core.density``), the adjoint ``influence`` density, the
``structural`` baseline, the ``density_flow`` check, the ``channels`` split and the
sufficient-condition tests (``conditions``), and the attention-bias fit (``bias_fit``);
``settings`` (torch-free) holds the settings of their config sections."""
