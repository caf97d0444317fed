/* The user rules file, for Python: _C.parse_rules(data) -> list of dicts.
 * Parsing and checking are the pure-C rules.c; this turns the result into
 * Python objects (arg_new may be any JSON value). */
#include "patcher.h"

#include "ttn/rules.h"

static PyObject *
json_to_python(const ttn_json *v)
{
    PyObject *result = NULL;
    size_t i;

    switch (v->type) {
    case TTN_JSON_NULL:
        return Py_NewRef(Py_None);
    case TTN_JSON_FALSE:
        return Py_NewRef(Py_False);
    case TTN_JSON_TRUE:
        return Py_NewRef(Py_True);
    case TTN_JSON_NUMBER:
        return v->is_integer ? PyLong_FromLongLong(v->integer) : PyFloat_FromDouble(v->number);
    case TTN_JSON_STRING:
        return PyUnicode_DecodeUTF8(v->string, (Py_ssize_t)v->length, "strict");
    case TTN_JSON_ARRAY:
        result = PyList_New((Py_ssize_t)v->count);
        if (result == NULL)
            return NULL;
        for (i = 0; i < v->count; i++) {
            PyObject *item = json_to_python(v->items[i]);

            if (item == NULL) {
                Py_DECREF(result);
                return NULL;
            }
            PyList_SET_ITEM(result, (Py_ssize_t)i, item);
        }
        return result;
    case TTN_JSON_OBJECT:
        result = PyDict_New();
        if (result == NULL)
            return NULL;
        for (i = 0; i < v->count; i++) {
            PyObject *item = json_to_python(v->items[i]);

            if (item == NULL || PyDict_SetItemString(result, v->keys[i], item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(result);
                return NULL;
            }
            Py_DECREF(item);
        }
        return result;
    }
    PyErr_SetString(PyExc_SystemError, "unknown JSON value");
    return NULL;
}

static PyObject *
rule_dict(const ttn_rule *rule)
{
    PyObject *arg_new = NULL, *result = NULL;

    switch (rule->kind) {
    case TTN_RULE_ARGS:
        arg_new = json_to_python(rule->arg_new);
        if (arg_new == NULL)
            goto exit;
        result = Py_BuildValue("{sssnsssLsO}", "kind", ttn_rule_kind_name(rule->kind), "index",
                               (Py_ssize_t)rule->index, "func_name", rule->func_name, "arg_idx",
                               rule->arg_idx, "arg_new", arg_new);
        break;
    case TTN_RULE_FUNC_NAME:
        result = Py_BuildValue("{sssnssss}", "kind", ttn_rule_kind_name(rule->kind), "index",
                               (Py_ssize_t)rule->index, "old_name", rule->old_name, "new_name",
                               rule->new_name);
        break;
    case TTN_RULE_MODULE_NAME:
        result = Py_BuildValue("{sssnssssss}", "kind", ttn_rule_kind_name(rule->kind), "index",
                               (Py_ssize_t)rule->index, "old_name", rule->old_name, "new_name",
                               rule->new_name, "parent_module", rule->parent_module);
        break;
    default:
        PyErr_SetString(PyExc_SystemError, "unknown rule kind");
    }

exit:
    Py_XDECREF(arg_new);
    return result;
}

static PyObject *
parse_rules(PyObject *module, PyObject *data)
{
    ttn_rules rules = {NULL, NULL, 0};
    char err[512];
    PyObject *list = NULL, *result = NULL;
    Py_buffer view;
    size_t i;
    int r;

    (void)module;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    r = ttn_rules_parse(view.buf, (size_t)view.len, &rules, err, sizeof(err));
    PyBuffer_Release(&view);
    if (r < 0) {
        PyErr_SetString(PyExc_ValueError, err);
        goto exit;
    }
    list = PyList_New(0);
    if (list == NULL)
        goto exit;
    for (i = 0; i < rules.count; i++) {
        PyObject *d = rule_dict(&rules.rules[i]);

        if (d == NULL || PyList_Append(list, d) < 0) {
            Py_XDECREF(d);
            goto exit;
        }
        Py_DECREF(d);
    }
    result = list;
    list = NULL;

exit:
    Py_XDECREF(list);
    ttn_rules_free(&rules);
    return result;
}

PyMethodDef ttn_rules_methods[] = {
    {"parse_rules", parse_rules, METH_O,
     "parse_rules(data: bytes) -> list of rule dicts; ValueError naming the rule and field"},
    {NULL, NULL, 0, NULL},
};
