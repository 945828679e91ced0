"""The pre-registered study (docs/study.md): its plan (study/plan.yaml), the record of the plan a run began
under (``record``), the primaries' estimators, the Holm-adjusted four-outcome reading, and docs/findings.md;
the second study's plan (study/plan2.yaml) read from its record into one page for both (``study2_reading``,
``study2_page``); and issue 55's fix plan read from its run's record into its page (``fix_reading``, ``fix_page``)."""
