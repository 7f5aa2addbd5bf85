"""The ``report`` pipeline (:mod:`.pipeline`): one HTML report of every experiment from the saved outputs; the hook
that lets it run when some experiments never ran (:mod:`.hooks`)."""
