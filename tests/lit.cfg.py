# lit configuration for otter's text tests (RUN lines through otter-opt, checked by FileCheck).
import os
import lit.formats

config.name = "otter"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".onnxtxt", ".test"]
config.test_source_root = os.path.join(config.otter_source_dir, "tests")
config.test_exec_root = os.path.join(config.otter_binary_dir, "tests", "lit-out")
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py"]
config.substitutions.append(("%otter-opt", os.path.join(config.otter_tools_dir, "otter-opt")))
config.substitutions.append(("%otter-train", os.path.join(config.otter_tools_dir, "otter-train")))
config.substitutions.append(("%otter-bench", os.path.join(config.otter_tools_dir, "otter-bench")))
config.substitutions.append(("FileCheck", config.filecheck))
config.substitutions.append(("%models", os.path.join(config.otter_source_dir, "models")))
# `%python`: the Python the build found (Debian's, with onnx), for checks such as `-m json.tool`.
config.substitutions.append(("%python", config.python))
# LLVM's test utilities (`not`, `count`) come from the same folder as FileCheck.
config.environment["PATH"] = os.path.dirname(config.filecheck) + os.pathsep + os.environ.get("PATH", "")
