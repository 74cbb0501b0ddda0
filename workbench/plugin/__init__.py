"""The plug-in surface: what a formulation is (``formulation``: the ``Formulation`` protocol and its
check), what it is handed and hands back (``problem``: ``Problem``, ``DesignProblem``,
``SynthesisResult``, ``DesignResult``), how it is found (``registry``: names, entry points, import
paths; it offers the whole surface under one name), how its parameters are declared once
(``parameters``: ``Options`` and ``option``) and the common ``synthesize`` of rule-built
formulations (``closed_form``). docs/adding-a-formulation.md walks through writing one."""
