"""Evidence: the workflow's tables turned into one row per claim (estimate, interval over
seeds, number of seeds, method, verdict), with the statistics in ``lostmid.stats.statistics``.

Seeds are the unit of replication: every effect is computed per seed first, then summarized
by an interval over seeds, and a verdict is read off that interval with a decision rule
fixed in advance.
"""
